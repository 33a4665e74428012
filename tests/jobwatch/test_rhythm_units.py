"""The learned threshold, the progress clock, the heartbeat record and the collective comparison, as units.

The comparison is run over real flight-recorder dumps (tests/fixtures/fr/gloo-op-mismatch: torch 2.13.0, gloo);
the size and dtype mismatches change one field of the last entry of those dumps.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.jobwatch import collectives, evidence, hang
from ddp_doctor.jobwatch.hook import ddp_doctor_heartbeat as heartbeat
from ddp_doctor.jobwatch.progress import ProgressClock
from ddp_doctor.jobwatch.rhythm import PHASE_ALLOWANCE_S, WARMUP_INTERVALS, Rhythm, RhythmConfig, percentile
from ddp_doctor.jobwatch.stacks import Activity, Frame, classify

FIXTURE = Path(__file__).parents[1] / "fixtures" / "fr" / "gloo-op-mismatch"


def _events(r: Rhythm, intervals: list[float]) -> None:
    t = 100.0
    r.event(t)
    for dt in intervals:
        t += dt
        r.event(t)


def test_learned_threshold_is_k_times_the_high_percentile_above_the_floor() -> None:
    r = Rhythm(RhythmConfig(floor_s=15, k=5))
    _events(r, [10.0] * 40)
    thr = r.threshold({})
    assert thr.seconds == 50.0 and thr.why.startswith("learned: 5 x p95"), thr
    fast = Rhythm(RhythmConfig(floor_s=15, k=5))
    _events(fast, [0.5] * 40)
    assert fast.threshold({}).seconds == 15.0  # the floor


def test_before_the_warm_up_the_start_up_allowance_holds() -> None:
    r = Rhythm(RhythmConfig(start_s=180))
    _events(r, [0.5] * (WARMUP_INTERVALS - 1))
    assert r.threshold({}).seconds == 180.0 and "start-up" in r.threshold({}).why
    assert r.last is not None
    r.event(r.last + 0.5)
    assert r.threshold({}).seconds == 15.0


def test_one_long_interval_among_many_does_not_set_the_threshold() -> None:
    r = Rhythm(RhythmConfig(floor_s=15, k=5))
    _events(r, [1.0] * 99 + [40.0])  # one 40 s checkpoint in 100 steps
    assert r.threshold({}).seconds == 15.0
    assert percentile([1.0] * 99 + [40.0], 0.95) == 1.0


def test_a_phase_seen_in_the_stacks_gets_its_own_allowance_and_fixed_overrides_all() -> None:
    r = Rhythm(RhythmConfig())
    _events(r, [0.5] * 40)
    thr = r.threshold({1: "checkpoint"})
    assert thr.seconds == PHASE_ALLOWANCE_S["checkpoint"] and "rank 1" in thr.why
    fixed = Rhythm(RhythmConfig(fixed_s=30))
    _events(fixed, [0.5] * 40)
    assert fixed.threshold({1: "compile"}).seconds == 30.0


def test_thresholds_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        RhythmConfig(floor_s=0)


def test_stacks_name_eval_and_init_phases() -> None:
    eval_frames = (
        Frame("/x/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125, "forward"),
        Frame("/home/u/train.py", 40, "evaluate"),
        Frame("/home/u/train.py", 90, "<module>"),
    )
    assert classify(eval_frames).kind == "eval"
    init_frames = (
        Frame("/x/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 4000, "_store_based_barrier"),
        Frame("/x/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 1700, "init_process_group"),
        Frame("/home/u/train.py", 5, "<module>"),
    )
    assert classify(init_frames).kind == "init"


def test_heartbeat_round_trip_and_a_corrupt_file_is_left_out(tmp_path: Path) -> None:
    beat = heartbeat.JobHeartbeat(3, 1234, 1.5, (heartbeat.GroupSeq("0", "default_pg", "gloo", 7),))
    heartbeat.write(str(tmp_path), beat)
    (tmp_path / "hb-rank-4.json").write_text('{"rank": 4, "groups": [[')
    (tmp_path / "hb-rank-5.json").write_text(json.dumps({"rank": 6, "pid": 1, "time": 0, "groups": []}))
    assert heartbeat.read_all(str(tmp_path)) == {3: beat}
    assert evidence.read_seq_numbers(tmp_path) == {3: heartbeat.GroupSeq("0", "default_pg", "gloo", 7)}


def _beat(run_dir: Path, rank: int, seq: int) -> None:
    heartbeat.write(
        str(run_dir), heartbeat.JobHeartbeat(rank, 100 + rank, 0.0, (heartbeat.GroupSeq("0", "", "gloo", seq),))
    )


def test_output_is_progress_only_until_collectives_are_seen(tmp_path: Path) -> None:
    clock = ProgressClock(tmp_path, RhythmConfig(), 0.0)
    assert clock.poll(1.0, output_grew=True) and clock.silent() == "output"
    _beat(tmp_path, 0, 3)
    assert clock.poll(2.0, output_grew=False) and clock.silent() == "collective"
    # Collectives stopped; the job keeps printing: that is not progress.
    assert not clock.poll(3.0, output_grew=True)
    assert clock.last_move == 2.0
    _beat(tmp_path, 0, 4)
    assert clock.poll(4.0, output_grew=False) and clock.last_move == 4.0


def _dumps(tmp_path: Path, change: dict[str, Any] | None = None) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for p in FIXTURE.glob("*-rank-*.json"):
        shutil.copy(p, run / p.name)
    if change is not None:
        dump = json.loads((run / "fr-rank-1.json").read_text())
        dump["entries"][-1].update(change)
        (run / "fr-rank-1.json").write_text(json.dumps(dump))
    return run


def _compare(run: Path, alive: dict[int, bool] | None = None) -> collectives.Comparison:
    records, missing = evidence.collective_records(run, alive or {0: True, 1: True}, recorder_on=True)
    return collectives.compare(records, missing)


def test_a_different_op_is_a_mismatch_with_both_sides(tmp_path: Path) -> None:
    c = _compare(_dumps(tmp_path))
    assert c.verdict == "mismatch" and c.seq == 22 and c.group == "0", c
    assert [s.ranks for s in c.sides] == [(0,), (1,)]
    assert c.sides[0].call == "all_reduce of Float[520] into Float[520]"
    assert c.sides[1].call == "all_gather of Float[520] into Float[2, 520]"
    assert "rank 0 called all_reduce" in c.message() and "rank 1 called all_gather" in c.message()


def test_a_different_size_is_a_mismatch_with_both_sides(tmp_path: Path) -> None:
    change = {"profiling_name": "gloo:all_reduce", "input_sizes": [[1040]], "output_sizes": [[1040]]}
    c = _compare(_dumps(tmp_path, change))
    assert c.verdict == "mismatch" and c.seq == 22
    assert [s.call for s in c.sides] == [
        "all_reduce of Float[520] into Float[520]",
        "all_reduce of Float[1040] into Float[1040]",
    ]


def test_a_different_dtype_is_a_mismatch_with_both_sides(tmp_path: Path) -> None:
    change = {"profiling_name": "gloo:all_reduce", "output_sizes": [[520]], "input_dtypes": ["Double"]}
    change["output_dtypes"] = ["Double"]
    c = _compare(_dumps(tmp_path, change))
    assert c.verdict == "mismatch"
    assert "Double[520]" in c.sides[1].call and "Float[520]" in c.sides[0].call


def test_the_same_collective_everywhere_with_one_rank_short_is_a_lag(tmp_path: Path) -> None:
    run = _dumps(tmp_path)
    dump = json.loads((run / "fr-rank-1.json").read_text())
    dump["entries"] = dump["entries"][:-1]  # rank 1 never reached #22
    (run / "fr-rank-1.json").write_text(json.dumps(dump))
    c = _compare(run)
    assert c.verdict == "lag" and c.behind == (1,) and c.seq == 22 and c.reached == 21, c
    assert "rank 1 never entered collective #22" in c.message()


def test_a_missing_dump_is_said_with_why_and_the_rest_still_compared(tmp_path: Path) -> None:
    run = _dumps(tmp_path)
    (run / "fr-rank-1.json").unlink()
    (run / "hb-rank-1.json").unlink()
    c = _compare(run, {0: True, 1: True})
    assert [m.rank for m in c.missing] == [1]
    assert "did not answer the request" in c.missing[0].why
    (run / "fr-rank-0.json").write_text("{cut")
    c = _compare(run, {0: True, 1: False})
    whys = {m.rank: m.why for m in c.missing}
    assert "does not parse" in whys[0] and "had ended before" in whys[1], whys


def test_without_the_recorder_the_heartbeats_still_number_a_lag(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _beat(run, 0, 22)
    _beat(run, 1, 21)
    records, missing = evidence.collective_records(run, {0: True, 1: True}, recorder_on=False)
    c = collectives.compare(records, missing)
    assert c.verdict == "lag" and c.behind == (1,) and c.source == "sequence numbers" and not c.missing


def test_the_judgement_names_a_mismatch_not_a_lag(tmp_path: Path) -> None:
    c = _compare(_dumps(tmp_path))
    waiting = Activity("collective", "waiting in torch.distributed all_gather", None)
    backward = Activity("backward", "in backward (autograd; DDP all-reduces gradients here)", None)
    obs = [hang.RankObs(0, backward, True, 0.0), hang.RankObs(1, waiting, True, 0.0)]
    j = hang.judge(obs, 20.0, c, "collective")
    assert j.verdict == "hang" and j.kind == "mismatch" and j.behind == ()
    assert j.message.startswith("no collective for 20 s: the ranks called different collectives at #22")


def test_uneven_all_to_all_and_a_gather_root_are_not_mismatches(tmp_path: Path) -> None:
    both = {"input_sizes": [[520]], "input_dtypes": ["Float"], "output_dtypes": ["Float"]}
    for op, sizes in (("gloo:all_to_all", [[3, 7]]), ("gloo:gather", [])):
        run = tmp_path / op.replace(":", "-")
        run.mkdir()
        for rank, out in ((0, [[520]]), (1, sizes)):
            shutil.copy(FIXTURE / f"fr-rank-{rank}.json", run / f"fr-rank-{rank}.json")
            dump = json.loads((run / f"fr-rank-{rank}.json").read_text())
            dump["entries"][-1].update(both, profiling_name=op, output_sizes=out)
            (run / f"fr-rank-{rank}.json").write_text(json.dumps(dump))
        assert _compare(run).verdict == "agree", op


def test_every_rank_here_waiting_with_none_behind_waits_longer_only_when_ranks_run_elsewhere() -> None:
    waiting = Activity("collective", "waiting in torch.distributed all_reduce", None)
    obs = [hang.RankObs(0, waiting, True, 0.0), hang.RankObs(1, waiting, True, 0.0)]
    j = hang.judge(obs, 20.0, collectives.Comparison("agree"), "collective")
    assert j.verdict == "hang" and j.behind == ()
    assert hang.elsewhere(j, all_ranks_here=False)
    assert not hang.elsewhere(j, all_ranks_here=True)
    lag = hang.judge(obs, 20.0, collectives.Comparison("lag", "0", 5, behind=(1,), reached=4), "collective")
    assert lag.behind == (1,) and not hang.elsewhere(lag, all_ranks_here=False)


def test_a_stalled_rank_says_the_last_collective_it_issued() -> None:
    sleeping = Activity("user", "running <module> at train.py:60: time.sleep(1.0)", None)
    obs = [hang.RankObs(0, sleeping, True, 0.0, last="nccl:all_reduce #812 (scheduled)")]
    j = hang.judge(obs, 20.0, None, "collective", all_here=True)
    assert j.kind == "stalled" and j.behind == (0,)
    assert "(its last collective: nccl:all_reduce #812 (scheduled))" in j.message, j.message
