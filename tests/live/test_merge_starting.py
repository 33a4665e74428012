"""A rank that torchrun ends while it is still starting, because a peer already failed, is not the cause.

Recorded on the H200: `check --nproc 2` on one GPU; rank 1 raised in init while rank 0 was still
importing torch, and torchrun's SIGTERM to rank 0 was first taken for the root cause."""

from __future__ import annotations

from ddp_doctor.live.merge import merge
from ddp_doctor.report import Status
from tests.live.test_merge import outcome, payload, plan


def _rank1_fails_in_init() -> dict[int, dict[str, object]]:
    error = {
        "type": "PhaseError",
        "message": "rank 1 has LOCAL_RANK 1 but only 1 GPU is visible",
        "cause": "more ranks than GPUs",
        "remedy": "--nproc 1",
    }
    return {
        1: payload(
            1, [{"name": "init", "status": "fail", "kind": "error", "started": 10.0, "failed_at": 10.5, "error": error}]
        )
    }


def test_peer_ended_while_starting_is_secondary() -> None:
    beats = {
        0: {"phase": "start", "time": 9.0, "pid": 100, "progress": 0},
        1: {"phase": "done", "time": 10.6, "pid": 101, "progress": 3},
    }
    m = merge(outcome(_rank1_fails_in_init(), beats, {"rank 0": -15, "rank 1": 1, "torchrun": 1}), plan())
    assert m.root is not None and (m.root.rank, m.root.phase) == (1, "init")
    assert m.root.cause == "more ranks than GPUs" and m.root.remedy == "--nproc 1"
    rank0 = [r for r in m.results if r.id == "live.init" and r.rank == 0]
    assert len(rank0) == 1 and rank0[0].status is Status.SKIP and "ended by torchrun" in rank0[0].summary


def test_rank_that_crashes_while_starting_is_still_the_cause() -> None:
    beats = {
        0: {"phase": "start", "time": 9.0, "pid": 100, "progress": 0},
        1: {"phase": "init", "time": 9.5, "pid": 101, "progress": 1},
    }
    ranks = {1: payload(1, [{"name": "init", "status": "running", "started": 9.5}], finished=False)}
    m = merge(outcome(ranks, beats, {"rank 0": -11, "rank 1": -15, "torchrun": 1}), plan())
    assert m.root is not None and m.root.rank == 0 and m.root.status is Status.FAIL
    assert "SIGSEGV" in m.root.summary


def test_every_rank_ended_with_no_failure_elsewhere_is_still_a_failure() -> None:
    beats = {r: {"phase": "start", "time": 9.0, "pid": 100 + r, "progress": 0} for r in (0, 1)}
    m = merge(outcome({}, beats, {"rank 0": -15, "rank 1": -15, "torchrun": 1}), plan())
    ended = [r for r in m.results if r.id == "live.init"]
    assert [r.status for r in ended] == [Status.FAIL, Status.FAIL]
    assert m.root is not None and "no rank had failed" in m.root.summary and "SIGTERM" in (m.root.cause or "")


def test_ranks_ended_while_other_nodes_ranks_are_unseen_do_not_blame_the_outside() -> None:
    """Multi-node: this node knows ranks 0-1 of 4; torchrun ended them after a rank elsewhere failed."""
    beats = {r: {"phase": "collectives", "time": 9.0, "pid": 100 + r, "progress": 2} for r in (0, 1)}
    m = merge(outcome({}, beats, {"rank 0": -15, "rank 1": -15, "torchrun": 1}), plan(world_size=4, ranks={0, 1}))
    assert m.root is not None and m.root.status is Status.FAIL
    assert "no rank on this node had failed" in m.root.summary
    assert "a rank on another node failed" in (m.root.cause or "")
