"""Hangs named by the learned threshold, and healthy quiet phases not called hangs: real torchrun + gloo jobs.

tests/jobwatch/jobs/rhythm.py steps at a steady pace and then hangs at a known step, or has one long quiet
phase. The assertions are on what the report names (the threshold was the learned one, the behind rank,
the mismatch's two sides, no run.hang), never on how fast: benchmarks/bench_hang_time.py measures that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.jobwatch.runner import Ran, run_doctor, torchrun

RHYTHM_JOB = Path(__file__).with_name("jobs") / "rhythm.py"


def _job(tmp: Path, *job_args: str, doctor: tuple[str, ...] = ()) -> Ran:
    marker = str(tmp / "hang.at")
    command = torchrun(RHYTHM_JOB, 2, "--marker", marker, *job_args)
    return run_doctor(tmp, ["--on-hang", "kill", "--exit-code", "verdict", *doctor], command, timeout=400)


def _hang(ran: Ran) -> dict[str, Any]:
    assert ran.report["root_cause"] == "run.hang", [(r["id"], r["summary"]) for r in ran.report["results"]]
    assert ran.returncode == 10
    return ran.result("run.hang")


def test_a_rank_that_leaves_the_loop_is_named_under_the_learned_threshold(tmp_path: Path) -> None:
    ran = _job(tmp_path, "--step-s", "0.05", "--steps", "100000", "--hang", "leave", "--hang-at", "200")
    hang = _hang(ran)
    assert hang["observed"]["threshold"].startswith("learned:"), hang["observed"]["threshold"]
    assert hang["observed"]["behind"] == [1] and hang["observed"]["kind"] == "collective"
    assert hang["observed"]["collectives"]["verdict"] == "lag"
    assert hang["observed"]["collectives"]["behind"] == [1]
    assert "no collective for" in hang["summary"]
    assert ran.report["facts"]["run"]["hangs"][0]["stacks"], "the stacks come with the verdict"


def test_collectives_that_stop_while_a_rank_keeps_printing_are_a_hang(tmp_path: Path) -> None:
    ran = _job(tmp_path, "--step-s", "0.05", "--steps", "100000", "--hang", "leave-printing", "--hang-at", "200")
    hang = _hang(ran)
    assert hang["observed"]["behind"] == [1], hang
    assert "waiting for the peer's file" in (ran.run_dir / "rank-1.log").read_text()  # it did keep printing


def test_a_rank_that_calls_a_different_collective_is_a_mismatch_with_both_sides(tmp_path: Path) -> None:
    ran = _job(tmp_path, "--step-s", "0.05", "--steps", "100000", "--hang", "mismatch", "--hang-at", "200")
    hang = _hang(ran)
    assert hang["observed"]["kind"] == "mismatch", hang
    compared = hang["observed"]["collectives"]
    assert compared["verdict"] == "mismatch"
    assert [s["ranks"] for s in compared["sides"]] == [[0], [1]]
    assert compared["sides"][0]["call"].startswith("all_reduce of Float[")
    assert compared["sides"][1]["call"].startswith("all_gather of Float[")
    assert "different collectives" in hang["summary"] and "mismatch" in hang["cause"]


# Each healthy job has one quiet phase much longer than the learned threshold (--hang-floor 5 makes the
# threshold of a 0.05 s step job 5 s): the examination, or the phase's allowance, must keep it from a hang.
QUIET = {
    "checkpoint": ("--quiet", "checkpoint", "--quiet-s", "30"),
    "eval": ("--quiet", "eval", "--quiet-s", "30"),
    "compile": ("--quiet", "compile", "--compile-blocks", "6"),
    "first-batch": ("--quiet", "first-batch", "--quiet-s", "30"),
}


@pytest.mark.parametrize("phase", sorted(QUIET))
def test_a_long_healthy_quiet_phase_is_not_a_hang(tmp_path: Path, phase: str) -> None:
    ran = _job(
        tmp_path, "--step-s", "0.05", "--steps", "400", "--quiet-at", "150", *QUIET[phase], doctor=("--hang-floor", "5")
    )
    hangs = [r for r in ran.report["results"] if r["id"] == "run.hang"]
    assert not hangs, hangs[0]["summary"]
    assert ran.returncode == 0, ran.stderr.decode(errors="replace")[-2000:]
    assert "done" in (ran.run_dir / "rank-0.log").read_text()
