"""The one rule between static inference and live evidence, in both orders of the results."""

from __future__ import annotations

import itertools

from ddp_doctor.live.reconcile import reconcile
from ddp_doctor.report import Result, Status


def _static_nccl_fail() -> Result:
    return Result(
        "env.nccl",
        "NCCL library",
        Status.FAIL,
        "no NCCL library found for this CUDA build of torch: this environment cannot run DDP on GPUs",
        cause="libnccl.so is neither in torch/lib nor in an nvidia-nccl-cu* package",
    )


def _live(pg: Status = Status.PASS, coll: Status = Status.PASS) -> list[Result]:
    return [
        Result("live.launch", "torchrun starts the ranks", Status.PASS, "torchrun on PATH launched 1 rank(s)"),
        Result("live.init.process_group", "pg", pg, "init_process_group(nccl) with world size 1"),
        Result("live.collectives.all_reduce_sum", "ar", coll, "all_reduce_sum fp32 bf16 fp16 exact"),
        Result("live.collectives.broadcast", "bc", Status.PASS, "broadcast exact"),
    ]


def _statuses(results: list[Result]) -> dict[str, Status]:
    return {r.id: r.status for r in results}


def test_live_nccl_pass_outranks_static_nccl_fail_in_every_order() -> None:
    items = [_static_nccl_fail(), *_live()]
    outcomes = []
    for order in itertools.permutations(items):
        out = reconcile(list(order))
        outcomes.append(_statuses(out))
        nccl = next(r for r in out if r.id == "env.nccl")
        assert nccl.status is Status.WARN
        assert "live run" in nccl.summary and "static inference was wrong" in nccl.summary
        assert nccl.observed["static"]["status"] == "fail"
    assert all(o == outcomes[0] for o in outcomes)


def test_live_failure_leaves_the_static_fail_standing_in_both_orders() -> None:
    for live in (_live(coll=Status.FAIL), _live(pg=Status.FAIL)):
        for items in ([_static_nccl_fail(), *live], [*live, _static_nccl_fail()]):
            out = reconcile(items)
            assert next(r for r in out if r.id == "env.nccl").status is Status.FAIL


def test_gloo_run_does_not_prove_nccl() -> None:
    live = _live()
    live[1] = Result("live.init.process_group", "pg", Status.PASS, "init_process_group(gloo) with world size 2")
    for items in ([_static_nccl_fail(), *live], [*live, _static_nccl_fail()]):
        assert next(r for r in reconcile(items) if r.id == "env.nccl").status is Status.FAIL


def test_static_pass_with_live_fail_stays_a_fail_verdict() -> None:
    static_ok = Result("env.nccl", "NCCL library", Status.PASS, "NCCL 2.28.9 loads")
    live = _live(coll=Status.FAIL)
    for items in ([static_ok, *live], [*live, static_ok]):
        out = reconcile(items)
        assert _statuses(out)["live.collectives.all_reduce_sum"] is Status.FAIL
        assert _statuses(out)["env.nccl"] is Status.PASS


def test_torch_missing_in_files_but_ranks_ran_torch() -> None:
    missing = Result("env.torch.installed", "torch", Status.FAIL, "torch is not installed")
    for items in ([missing, *_live()], [*_live(), missing]):
        assert _statuses(reconcile(items))["env.torch.installed"] is Status.WARN


def test_live_failure_caused_by_a_variable_names_it() -> None:
    from ddp_doctor.live.reconcile import blame_variables
    from ddp_doctor.report import Evidence

    init_fail = Result(
        "live.init",
        "init",
        Status.FAIL,
        "rank 0 failed in init: NCCL error: invalid usage",
        cause="ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
        evidence=[Evidence("rank-0.log", "NCCL WARN Error: network Bogus not found.")],
        rank=0,
    )
    out = blame_variables([init_fail], {"NCCL_NET": "Bogus"}, ["lo", "eth0"])
    assert out[0].cause and out[0].cause.startswith("NCCL_NET=Bogus is the root cause")
    out = blame_variables([init_fail], {"NCCL_ALGO": "Bogus"}, ["lo", "eth0"])
    assert out[0].cause and "NCCL_ALGO=Bogus is the root cause" in out[0].cause and "Ring" in out[0].cause
    ifname = Result("live.init", "init", Status.FAIL, "Bootstrap : no socket interface found", rank=1)
    out = blame_variables([ifname], {"NCCL_SOCKET_IFNAME": "nonexist0"}, ["lo", "eth0"])
    assert out[0].cause and "NCCL_SOCKET_IFNAME=nonexist0" in out[0].cause
    # a valid setting next to an unrelated failure is not blamed
    out = blame_variables([init_fail], {"NCCL_NET": "Socket", "NCCL_ALGO": "Ring"}, ["eth0"])
    assert out[0].cause == init_fail.cause
