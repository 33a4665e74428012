"""The live chain as recorded on one H200 with NCCL (gpu/live.sh); skipped until the lead commits it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_doctor.live import nccl_log
from ddp_doctor.report import Report

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "gpu" / "live"
pytestmark = pytest.mark.skipif(not (FIXTURE / "report.json").exists(),
                                reason="tests/fixtures/gpu/live/report.json not recorded yet (run gpu/live.sh on a GPU)")


def load() -> dict:  # type: ignore[type-arg]
    return json.loads((FIXTURE / "report.json").read_text())


def test_recorded_report_reads_back_and_passes() -> None:
    data = load()
    report = Report.from_dict(data)
    live = data["facts"]["live"]
    assert live["backend"] == "nccl" and live["world_size"] >= 1
    assert data["facts"]["torch"]["cuda"], "torch facts from rank 0 name the CUDA build"
    failed = [(r["id"], r["rank"], r["summary"]) for r in data["results"]
              if r["id"].startswith("live.") and r["status"] in ("fail", "error")]
    assert not failed, failed
    assert report.verdict().value in ("pass", "warn")
    device = next(r for r in data["results"] if r["id"] == "live.init.device")
    assert device["status"] == "pass" and "cuda" in device["summary"]


def test_recorded_report_has_nccl_transports_and_nvml_samples() -> None:
    data = load()
    transport = next(r for r in data["results"] if r["id"] == "live.nccl.transport")
    assert transport["status"] in ("pass", "warn"), transport
    assert transport["observed"]["version"], "NCCL printed its version into NCCL_DEBUG_FILE"
    util = [r for r in data["results"] if r["id"] == "live.balance.gpu_util"]
    assert util and util[0]["observed"]["per_rank"][0]["samples"] > 0


def test_recorded_nccl_log_parses() -> None:
    log = FIXTURE / "nccl-rank-0.log"
    if not log.exists():
        pytest.skip("nccl-rank-0.log not recorded")
    info = nccl_log.parse(log.read_text(errors="replace").splitlines())
    assert info["version"] and info["version"][0].isdigit()
