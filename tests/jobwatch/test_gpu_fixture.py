"""Re-judge what gpu/run.sh recorded on the H200 (tests/fixtures/gpu/run/): a one-rank NCCL job under the doctor.

Until the coordinator commits those files these tests skip, saying so; they are not counted as done.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu" / "run"


def _load(name: str) -> Any:
    p = FIXTURES / name
    if not p.exists():
        pytest.skip(f"{p} is recorded by gpu/run.sh on the H200 and not committed yet: NOT counted as done")
    return json.loads(p.read_text()) if name.endswith(".json") else p.read_text()


def _by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in report["results"]}


def test_healthy_nccl_job_passes_with_timeline_and_flight_recorder() -> None:
    report = _load("healthy.json")
    results = _by_id(report)
    assert report["verdict"] == "pass", [(r["id"], r["status"], r["summary"]) for r in report["results"]]
    run = report["facts"]["run"]
    assert run["returncode"] == 0
    samples = [s for s in run["gpu"]["timeline"] if "util_pct" in s]
    assert len(samples) >= 3 and max(s["util_pct"] for s in samples) > 10  # the matmuls show on the GPU
    assert results["run.balance.gpu"]["status"] == "pass"
    items = {i["name"]: i["state"] for i in results["run.observability"]["observed"]["items"]}
    assert items["flight recorder"] == "added" and items["NCCL warnings"] == "added"
    assert results["run.balance.steps"]["status"] == "pass"


def test_kernel_that_never_ends_is_stuck_in_cuda_work_not_a_collective() -> None:
    report = _load("stuck.json")
    hang = _by_id(report)["run.hang"]
    assert report["root_cause"] == "run.hang"
    assert hang["observed"]["kind"] == "cuda" and hang["observed"]["behind"] == [0], hang
    assert "stuck in CUDA work, not in a collective" in hang["summary"]
    state = report["facts"]["run"]["hangs"][0]["states"]["0"]
    assert state["activity"] == "cuda" and state["pending_collective"] is None
    assert report["facts"]["run"]["exit_class"] == "hang"


def test_overhead_on_the_gpu_is_below_one_percent() -> None:
    text = _load("overhead.txt")
    m = re.search(r"ratio ([\d.]+)", text)
    assert m, text
    assert float(m.group(1)) < 1.01, text
