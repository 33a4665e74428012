from __future__ import annotations

import json

import pytest

from ddp_doctor.report import Evidence, Report, Result, Status, Verdict


def _report(*statuses: Status) -> Report:
    r = Report.for_host("check")
    for i, s in enumerate(statuses):
        r.add(Result(f"env.x{i}", f"x{i}", s, f"summary {i}"))
    return r


@pytest.mark.parametrize(
    ("statuses", "verdict", "code", "strict_code"),
    [
        ((), Verdict.PASS, 0, 0),
        ((Status.PASS, Status.SKIP), Verdict.PASS, 0, 0),
        ((Status.PASS, Status.WARN), Verdict.WARN, 0, 1),
        ((Status.WARN, Status.FAIL), Verdict.FAIL, 1, 1),
        ((Status.ERROR,), Verdict.FAIL, 1, 1),  # an unknown is never a pass
    ],
)
def test_verdict_and_exit_code(statuses: tuple[Status, ...], verdict: Verdict, code: int, strict_code: int) -> None:
    report = _report(*statuses)
    assert report.verdict() is verdict
    assert report.exit_code() == code
    assert report.exit_code(strict=True) == strict_code


def test_root_cause_is_the_earliest_failure_in_time() -> None:
    report = Report.for_host("check")
    report.add(Result("live.ddp", "ddp", Status.FAIL, "late", rank=0, started=200.0))
    report.add(Result("live.collectives", "coll", Status.FAIL, "early", rank=1, started=100.0))
    report.add(Result("env.shm", "shm", Status.WARN, "w"))
    assert report.pick_root_cause() == "live.collectives"


def test_round_trip_through_json_keeps_every_field() -> None:
    report = Report.for_host("check")
    report.facts = {"torch": {"version": "2.7.0"}}
    report.add(
        Result(
            "live.ddp.param_sync",
            "params",
            Status.FAIL,
            "2 of 2 ranks differ",
            cause="c",
            remedy="r",
            observed={"max_abs_diff": 0.5},
            expected={"max_abs_diff": 0},
            metrics={"step_ms": 1.5},
            rank=1,
            node="n0",
            phase="ddp",
            evidence=[Evidence("rank-1.log", "boom", 3)],
            duration_s=0.2,
            started=1.0,
        )
    )
    report.root_cause = "live.ddp.param_sync"
    d = json.loads(json.dumps(report.to_dict()))
    assert d["schema_version"] == 1 and d["verdict"] == "fail"
    back = Report.from_dict(d)
    assert back.to_dict() == report.to_dict()


def test_from_dict_refuses_another_schema_version() -> None:
    d = _report(Status.PASS).to_dict()
    d["schema_version"] = 99
    with pytest.raises(ValueError, match="schema_version"):
        Report.from_dict(d)
