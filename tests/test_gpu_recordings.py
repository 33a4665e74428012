"""Reports recorded on one H200 (gpu/*.sh and the extra runs listed in docs/gpu-results.md),
re-read and re-judged here where there is no GPU."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.env import checks
from ddp_doctor.render import FORMATS, render
from ddp_doctor.report import Report
from tests.conftest import FIXTURES

GPU = FIXTURES / "gpu"


def _load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def _by_id(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in report["results"]:
        out.setdefault(r["id"], []).append(r)
    return out


def test_two_ranks_on_one_gpu_fail_in_init_naming_rank_1_with_cause_and_remedy() -> None:
    report = _load(GPU / "live" / "nproc2-on-1-gpu.json")
    assert report["verdict"] == "fail" and report["root_cause"] == "live.init"
    assert report["facts"]["live"]["root_cause"]["rank"] == 1
    failed = [r for r in report["results"] if r["status"] == "fail"]
    assert [(r["id"], r["rank"], r["phase"]) for r in failed] == [("live.init", 1, "init")]
    # "GPU(s) are": the wording when the fixture was recorded; "GPU is": since words.plural (re-recorded)
    assert re.search(r"only 1 GPU(\(s\) are| is) visible", failed[0]["summary"]), failed[0]["summary"]
    assert failed[0]["cause"] and "--nproc" in (failed[0]["remedy"] or "")
    # rank 0 had its GPU and was not blamed
    assert not any(r["status"] == "fail" and r["rank"] == 0 for r in report["results"])


def test_empty_cuda_visible_devices_hides_the_gpu() -> None:
    report = _load(GPU / "static" / "cuda-visible-devices-empty.json")
    gpus = _by_id(report)["env.gpus"][0]
    assert gpus["status"] == "warn" and "CUDA_VISIBLE_DEVICES=''" in gpus["summary"]
    assert report["facts"]["gpus"]["count"] == 0 and report["facts"]["gpus"]["physical_count"] == 1
    rejudged = {r.id: r.status.value for r in checks.evaluate(report["facts"])}
    assert rejudged["env.gpus"] == "warn"


def test_gpu_health_phase_of_check_meets_the_h200_rates() -> None:
    report = _load(GPU / "live" / "check-gpu-health.json")
    results = {r["id"]: r for r in report["results"]}
    bf16 = results["live.gpu_health.matmul.bf16"]
    copy = results["live.gpu_health.copy"]
    tflops = next(v for k, v in bf16["metrics"].items() if "tflops" in k)
    gbps = next(v for k, v in copy["metrics"].items() if "gbps" in k)
    # 90% of the rates measured on this machine kind before (788 TFLOP/s, 4.3 TB/s)
    assert tflops >= 0.9 * 788 and gbps >= 0.9 * 4300
    assert report["verdict"] in ("pass", "warn")


# bench_vs_loop/ holds a benchmark's raw figures (tests/bench/test_bench_vs_loop.py reads them), not reports.
NOT_REPORTS = {"bench_vs_loop"}
REPORTS = sorted(p for p in GPU.glob("*/*.json") if p.parent.name not in NOT_REPORTS)


def test_the_recordings_are_found() -> None:
    assert len(REPORTS) >= 20 and all((GPU / d).is_dir() for d in NOT_REPORTS)


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_recording_renders_in_every_format(path: Path, fmt: str) -> None:
    report = Report.from_dict(_load(path))
    assert report.results and report.command in render(report, fmt)
