"""merge() on recorded-shape payloads: who is the root cause when ranks fail, hang or never start."""

from __future__ import annotations

from typing import Any

from ddp_doctor.live.launch import RunOutcome
from ddp_doctor.live.merge import Plan, merge
from ddp_doctor.rundir.errorfile import ErrorFile
from ddp_doctor.rundir.records import Heartbeat, RankResult

PHASES = ["init", "collectives", "dataloader", "sampler", "ddp", "balance"]


def plan(**kw: Any) -> Plan:
    base: dict[str, Any] = {
        "backend": "gloo",
        "nproc": 2,
        "world_size": 2,
        "nnodes": "1",
        "phases": PHASES,
        "timeout_s": 60,
        "node": "n0",
    }
    base.update(kw)
    return Plan(**base)


def passed(name: str, t: float) -> dict[str, Any]:
    return {
        "name": name,
        "status": "pass",
        "started": t,
        "duration_s": 0.1,
        "checks": [{"id": f"live.{name}.x", "status": "pass", "summary": "ok"}],
    }


def payload(rank: int, phases: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    return {"rank": rank, "node": "n0", "pid": 100 + rank, "phases": phases, "finished": True, **kw}


def outcome(
    ranks: dict[int, dict[str, Any]], beats: dict[int, dict[str, Any]], codes: dict[str, int], **kw: Any
) -> RunOutcome:
    return RunOutcome(
        argv=["torchrun"],
        returncode=1,
        timed_out=False,
        duration_s=3.0,
        ranks={r: RankResult.from_dict(p) for r, p in ranks.items()},
        heartbeats={r: Heartbeat.from_dict(b) for r, b in beats.items()},
        exit_codes=codes,
        **kw,
    )


def test_all_pass_merges_checks_across_ranks() -> None:
    ranks = {
        r: payload(r, [passed(p, 10.0 + i) for i, p in enumerate(PHASES)], torch={"version": "2.13.0"}) for r in (0, 1)
    }
    beats = {r: {"phase": "done", "time": 20.0, "pid": 100 + r, "progress": 50} for r in (0, 1)}
    m = merge(outcome(ranks, beats, {"torchrun": 0}), plan())
    assert m.root is None
    merged = [r for r in m.results if r.id == "live.init.x"]
    assert len(merged) == 1 and merged[0].rank is None and "(both ranks agree)" in merged[0].summary
    assert sorted(r.rank for r in m.results if r.id == "live.ddp") == [0, 1]  # type: ignore[type-var]
    assert m.torch_facts == {"version": "2.13.0"}
    assert m.live_facts["world_size"] == 2 and m.live_facts["backend"] == "gloo"


def test_killed_rank_is_the_root_not_the_peer_that_saw_it() -> None:
    peer_error = {"type": "RuntimeError", "message": "[pair.cc:537] Read error: Connection reset by peer"}
    ranks = {
        0: payload(
            0,
            [
                passed("init", 10.0),
                {
                    "name": "collectives",
                    "status": "fail",
                    "kind": "error",
                    "started": 11.0,
                    "failed_at": 11.2,
                    "error": peer_error,
                },
            ],
        ),
        1: payload(
            1, [passed("init", 10.0), {"name": "collectives", "status": "running", "started": 11.0}], finished=False
        ),
    }
    beats = {
        0: {"phase": "done", "time": 11.3, "pid": 100, "progress": 9},
        1: {"phase": "collectives", "step": "all_reduce_sum:fp32", "time": 11.05, "pid": 101, "progress": 5},
    }
    m = merge(outcome(ranks, beats, {"rank 1": -9, "torchrun": 1}), plan())
    assert m.root is not None and (m.root.rank, m.root.phase) == (1, "collectives")
    assert "SIGKILL" in m.root.summary and "all_reduce_sum" in m.root.summary
    assert m.results[0] is m.root
    echo = [r for r in m.results if r.id == "live.collectives" and r.rank == 0]
    assert echo and "a consequence: rank 1 failed first" in echo[0].summary
    assert [r.id for r in m.results if r.status.value == "skip" and r.rank is None] == [
        "live.dataloader",
        "live.sampler",
        "live.ddp",
        "live.balance",
    ]


def test_of_two_stuck_ranks_the_laggard_is_the_root() -> None:
    def stuck(rank: int, step: str) -> dict[str, Any]:
        return payload(
            rank,
            [
                passed("init", 10.0),
                {
                    "name": "collectives",
                    "status": "fail",
                    "kind": "stuck",
                    "started": 11.0,
                    "failed_at": 20.0 + rank,
                    "budget_s": 9,
                    "error": {"type": "PhaseTimeout", "message": "stuck", "step": step},
                },
            ],
            finished=False,
        )

    ranks = {0: stuck(0, "broadcast:fp32"), 1: stuck(1, None)}  # type: ignore[arg-type]
    beats = {
        0: {"phase": "collectives", "step": "broadcast:fp32", "time": 11.5, "pid": 100, "progress": 9},
        1: {"phase": "collectives", "step": None, "time": 11.0, "pid": 101, "progress": 4},
    }
    m = merge(outcome(ranks, beats, {"rank 0": 124, "rank 1": 124}), plan())
    assert m.root is not None and m.root.rank == 1  # rank 0 failed earlier in time but was only waiting


def test_rank_that_never_started_is_blamed() -> None:
    join = {"type": "PeerError", "message": "1 of 2 ranks joined within 5.0 s; missing: rank 1", "blame_ranks": [1]}
    ranks = {
        0: payload(
            0, [{"name": "init", "status": "fail", "kind": "error", "started": 10.0, "failed_at": 15.0, "error": join}]
        )
    }
    beats = {0: {"phase": "done", "time": 15.1, "pid": 100, "progress": 4}}
    m = merge(outcome(ranks, beats, {"rank 0": 1, "rank 1": -15}), plan())
    assert m.root is not None and (m.root.rank, m.root.phase) == (1, "init")
    assert "never started" in m.root.summary and "rank 0 waited for it" in m.root.summary


def test_nccl_socket_between_nodes_with_ib_warns() -> None:
    logs = {
        "nccl-rank-0.log": [
            "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
            "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/Socket/0",
        ]
    }
    o = outcome({}, {}, {}, logs=logs)
    m = merge(o, plan(backend="nccl", nnodes="2", world_size=4))
    nccl = [r for r in m.results if r.id == "live.nccl.transport"]
    assert nccl and nccl[0].status.value == "warn" and "NET/Socket" in nccl[0].summary
    single = merge(o, plan(backend="nccl"))
    assert [r.status.value for r in single.results if r.id == "live.nccl.transport"] == ["pass"]


def test_rank_that_crashes_before_its_first_phase_is_named() -> None:
    ranks = {0: payload(0, [passed(p, 10.0 + i) for i, p in enumerate(PHASES[:1])], finished=False)}
    beats = {
        0: {"phase": "init", "time": 10.0, "pid": 100, "progress": 2},
        1: {"phase": "start", "time": 9.0, "pid": 101, "progress": 1},
    }
    errors = {
        1: {
            "message": {
                "message": "ImportError: libcudart.so.12: cannot open shared object file",
                "extraInfo": {"py_callstack": "..."},
            }
        }
    }
    m = merge(
        outcome(ranks, beats, {"rank 1": 1}, error_files={r: ErrorFile.from_object(e) for r, e in errors.items()}),
        plan(),
    )
    assert m.root is not None and (m.root.rank, m.root.phase) == (1, "init")
    assert "before its first phase" in m.root.summary and "libcudart" in m.root.summary


def test_a_warning_diagnosis_never_lends_its_remedy_to_a_failing_phase() -> None:
    """Rank 1 raised in ddp; its log also shows a SIGTERM line, which only matches the warning diag.sigterm."""
    from ddp_doctor.diagnose import signature

    error = {"type": "RuntimeError", "message": "boom in ddp", "traceback": "RuntimeError: boom in ddp"}
    ranks = {
        0: payload(0, [passed(n, 10.0 + i) for i, n in enumerate(PHASES)]),
        1: payload(
            1,
            [passed(n, 10.0 + i) for i, n in enumerate(PHASES[:4])]
            + [{"name": "ddp", "status": "fail", "kind": "error", "started": 14.0, "failed_at": 14.5, "error": error}],
        ),
    }
    beats = {
        0: {"phase": "done", "time": 16.0, "pid": 100, "progress": 9},
        1: {"phase": "done", "time": 14.6, "pid": 101, "progress": 9},
    }
    log = ["torch.distributed.elastic.multiprocessing.api.SignalException: Process 1200 got signal: 15"]
    m = merge(outcome(ranks, beats, {"rank 1": 1, "torchrun": 1}, logs={"rank-1.log": log}), plan())
    failed = next(r for r in m.results if r.id == "live.ddp" and r.rank == 1)
    assert failed.status.value == "fail" and "diag.sigterm" in failed.observed["diagnosis"]
    sigterm = signature("diag.sigterm")
    assert sigterm is not None and sigterm.severity.value == "warn"
    assert failed.remedy != sigterm.remedy and failed.cause != sigterm.cause


def test_first_failure_skips_warnings() -> None:
    from ddp_doctor.live.merge import first_failure
    from ddp_doctor.report import Result, Status

    warn = Result("diag.w", "w", Status.WARN, "w", remedy="warn remedy")
    fail = Result("diag.f", "f", Status.FAIL, "f", remedy="fail remedy")
    assert first_failure([warn, fail]) is fail
    assert first_failure([warn]) is None and first_failure([]) is None


def test_ranks_that_agree_only_in_words_show_their_range_and_never_agree() -> None:
    from ddp_doctor.live.merge import _one_summary

    assert _one_summary(["step 0.10 s", "step 0.12 s"]) == "step 0.10–0.12 s (the range over both ranks)"
    assert _one_summary(["loss falls", "loss falls", "loss falls"]) == "loss falls (all 3 ranks agree)"
    assert _one_summary(["on cpu", "on cuda:1"]) is None  # different words: each rank keeps its own result
