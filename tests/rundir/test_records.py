"""The records a rank writes for its parent: both sides through one module; a torn or foreign file is a
clear error naming the file, never a half-read record; the parent's report names such a file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ddp_doctor.live.launch import RunOutcome
from ddp_doctor.live.merge import Plan, merge
from ddp_doctor.rundir import reader, writer
from ddp_doctor.rundir.layout import RUN_DIR_ENV
from ddp_doctor.rundir.records import (
    SCHEMA,
    CheckRecord,
    Heartbeat,
    PhaseErrorRecord,
    PhaseRecord,
    RankResult,
    RecordError,
)

CHECK = CheckRecord(
    "live.init.device", "warn", "one GPU", observed={"gpus": [0]}, metrics={"init_s": 0.5}, remedy="add a GPU"
)


def test_a_heartbeat_and_a_result_come_back_as_they_were_written() -> None:
    beat = Heartbeat("ddp", time=12.5, pid=7, progress=3, step="step 4", since=10.0, deadline=40.0)
    assert Heartbeat.from_json(beat.to_json()) == beat
    error = PhaseErrorRecord("PeerError", "1 of 2 ranks joined", blame_ranks=(1,), step="join", remedy="look at rank 1")
    result = RankResult(
        rank=2,
        pid=7,
        finished=True,
        node="n0",
        phases=(
            PhaseRecord("init", "pass", started=1.0, duration_s=0.5, checks=(CHECK,)),
            PhaseRecord("collectives", "fail", started=2.0, kind="error", error=error),
        ),
        body={"torch": {"version": "2.13.0"}},
    )
    assert RankResult.from_json(result.to_json()) == result
    assert result.phase("collectives") is not None and result.phase("collectives").error == error  # type: ignore[union-attr]
    assert json.loads(result.to_json())["schema"] == SCHEMA


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"schema": 1, "phase": "ddp", "time": 1.0, "pi', "not JSON"),  # cut short
        ("", "not JSON"),
        ("[1, 2]", "not an object"),
        ('{"phase": "ddp", "time": 1.0, "pid": 3, "progress": 1}', "no schema field"),  # another tool's file
        ('{"schema": 2, "phase": "ddp", "time": 1.0, "pid": 3, "progress": 1}', "schema 2"),  # a newer doctor
        ('{"schema": 1, "phase": "ddp", "time": 1.0, "pid": "3", "progress": 1}', "'pid' is '3'"),
        ('{"schema": 1, "phase": "ddp", "time": 1.0, "pid": 3}', "lacks its 'progress'"),
        ('{"schema": 1, "phase": "ddp", "time": true, "pid": 3, "progress": 1}', "'time' is True"),
    ],
)
def test_a_torn_foreign_or_newer_heartbeat_is_refused_with_why(text: str, said: str) -> None:
    with pytest.raises(RecordError, match="rank-3.hb") as caught:
        Heartbeat.from_json(text, "rank-3.hb")
    assert said in str(caught.value)


@pytest.mark.parametrize(
    ("phase", "said"),
    [
        ({"status": "pass"}, "lacks its 'name'"),
        ({"name": "init", "status": "fail", "error": {"message": "no type"}}, "lacks its 'type'"),
        ({"name": "init", "status": "fail", "error": {"type": "E", "blame_ranks": ["1"]}}, "not a list of ranks"),
        ({"name": "init", "status": "pass", "checks": [{"status": "pass", "summary": "s"}]}, "lacks its 'id'"),
        ({"name": "init", "status": "pass", "checks": ["live.init.device"]}, "holds a check that is not an object"),
        ({"name": "init", "status": "pass", "checks": [{**CHECK.to_dict(), "status": "ok"}]}, "'status' is 'ok'"),
        ({"name": "init", "status": "pass", "checks": [{**CHECK.to_dict(), "observed": [1]}]}, "'observed' is [1]"),
        ({"name": "init", "status": "pass", "duration_s": "0.5"}, "'duration_s' is '0.5'"),
    ],
)
def test_a_malformed_phase_is_refused_with_why(phase: dict[str, object], said: str) -> None:
    text = json.dumps({"schema": SCHEMA, "rank": 0, "pid": 5, "finished": True, "phases": [phase]})
    with pytest.raises(RecordError, match="rank-0.json") as caught:
        RankResult.from_json(text, "rank-0.json")
    assert said in str(caught.value)


def test_a_result_of_an_unknown_version_is_refused() -> None:
    text = json.dumps({"schema": SCHEMA + 1, "rank": 0, "pid": 5, "finished": True})
    with pytest.raises(RecordError, match=f"schema {SCHEMA + 1}; this ddp-doctor reads schema {SCHEMA}"):
        RankResult.from_json(text, "rank-0.json")


def test_the_reader_names_each_file_that_is_no_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("RANK", "0")
    writer.heartbeat("init")
    writer.write_result(RankResult.of({"rank": 0, "pid": os.getpid(), "finished": True, "phases": []}))
    (tmp_path / "rank-1.json").write_text('{"schema": 1, "rank": 1, "pid": 9, "fin')
    (tmp_path / "rank-1.hb").write_text(json.dumps({"schema": 99, "phase": "init"}))
    results, beats = reader.results(tmp_path), reader.heartbeats(tmp_path)
    assert set(results.records) == {0} and results.records[0].finished and results.records[0].phases == ()
    assert set(beats.records) == {0} and beats.records[0].phase == "init"
    assert list(results.unreadable) == ["rank-1.json"]
    assert "schema 99" in beats.unreadable["rank-1.hb"]


def test_the_report_names_a_rank_file_that_could_not_be_read() -> None:
    # Rank 1's result file is torn: it is judged from its heartbeat, and its result says which file was unreadable.
    phases = [{"name": "init", "status": "pass", "started": 10.0, "duration_s": 0.1, "checks": []}]
    outcome = RunOutcome(
        argv=["torchrun"],
        returncode=1,
        timed_out=False,
        duration_s=3.0,
        ranks={0: RankResult.from_dict({"rank": 0, "pid": 100, "node": "n0", "phases": phases, "finished": True})},
        heartbeats={
            0: Heartbeat("done", time=20.0, pid=100, progress=9),
            1: Heartbeat("collectives", time=15.0, pid=101, progress=3),
        },
        unreadable={"rank-1.json": "rank-1.json is not JSON (cut short, or not written by a rank): ..."},
        exit_codes={"rank 1": -9, "torchrun": 1},
    )
    plan = Plan(
        backend="gloo", nproc=2, world_size=2, nnodes="1", phases=["init", "collectives"], timeout_s=60, node="n0"
    )
    m = merge(outcome, plan)
    assert m.root is not None and m.root.rank == 1
    assert [e.text for e in m.root.evidence if e.source == "rank-1.json"] == [outcome.unreadable["rank-1.json"]]


def test_a_heartbeat_keeps_its_phase_start_and_deadline_until_the_phase_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("RANK", "0")
    writer.heartbeat("ddp", step="step 1", deadline=9e9)
    first = reader.read_heartbeats(tmp_path)[0]
    writer.heartbeat("ddp", step="step 2")
    second = reader.read_heartbeats(tmp_path)[0]
    assert (second.since, second.deadline, second.step) == (first.since, 9e9, "step 2")
    assert second.progress > first.progress
    writer.heartbeat("sampler", deadline=float("inf"))  # no deadline: none is shown
    third = reader.read_heartbeats(tmp_path)[0]
    assert third.phase == "sampler" and third.deadline is None and third.since is not None
    assert third.since >= second.since
