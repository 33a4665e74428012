"""Re-judge what gpu/run_failures.sh recorded on the H200 (tests/fixtures/gpu/run_failures/): run.failure in
explain's words, and `ddp-doctor explain` on the recorded run directories agreeing with it.

Until the coordinator commits those files these tests skip, saying so; they are not counted as done.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.diagnose import signature
from tests.conftest import run_cli

FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu" / "run_failures"


def _failure(name: str) -> dict[str, Any]:
    p = FIXTURES / name
    if not p.exists():
        pytest.skip(f"{p} is recorded by gpu/run_failures.sh on the H200 and not committed yet: NOT counted as done")
    report = json.loads(p.read_text())
    found = [r for r in report["results"] if r["id"] == "run.failure"]
    assert found, [r["id"] for r in report["results"]]
    return found[0]


def _explained(run_dir: str) -> dict[str, Any]:
    d = FIXTURES / run_dir
    if not d.is_dir():
        pytest.skip(f"{d} is recorded by gpu/run_failures.sh on the H200 and not committed yet: NOT counted as done")
    proc = run_cli("explain", "--format", "json", str(d))
    assert proc.returncode == 1, proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def _assert_recorded_and_rejudged_cause(failure: dict[str, Any], cause: str, run_dir: str) -> None:
    """The recording carries the signature's cause as it read on the day it was made (the catalogue's
    words may have grown since: a cause only gains sentences); today's explain on the recorded run
    directory carries today's cause in full."""
    first = failure["cause"].split(". ")[0]
    assert first and cause.startswith(first), (failure["cause"], cause)
    report = _explained(run_dir)
    root = next(r for r in report["results"] if r["id"] == report["root_cause"])
    assert root["id"] == failure["observed"]["diagnosis"] and root["cause"] == cause


def test_ddp_unused_parameters_on_nccl_shows_the_exception_line_and_the_signature() -> None:
    failure = _failure("unused.json")
    assert "Expected to have finished reduction in the prior iteration" in failure["summary"]
    assert "In addition" not in failure["summary"]
    sig = signature("diag.ddp_unused_parameters")
    assert sig is not None and failure["observed"]["diagnosis"] == "diag.ddp_unused_parameters"
    _assert_recorded_and_rejudged_cause(failure, sig.cause, "unused-run")


def test_two_ranks_on_one_gpu_name_the_invalid_ordinal_in_device_setup() -> None:
    failure = _failure("ordinal.json")
    assert failure["rank"] == 1, failure
    assert "invalid device ordinal" in failure["summary"] and "TORCH_USE_CUDA_DSA" not in failure["summary"]
    assert failure["phase"].startswith("device setup"), failure["phase"]
    sig = signature("diag.invalid_device_ordinal")
    assert sig is not None and failure["observed"]["diagnosis"] == "diag.invalid_device_ordinal"
    _assert_recorded_and_rejudged_cause(failure, sig.cause, "ordinal-run")


def test_the_launchers_log_is_named_by_its_pid_not_taken_for_a_rank() -> None:
    # proc-531.log is torchrun's own output in the run directory: its lines are rank 0's only where torchrun's
    # summary says so ("rank : 0"), never "rank 531".
    sigterm = [r for r in _explained("ordinal-run")["results"] if r["id"] == "diag.sigterm"]
    assert sigterm and all(r["rank"] in (0, 1, None) for r in sigterm), sigterm
