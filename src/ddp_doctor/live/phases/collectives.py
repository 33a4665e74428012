"""collectives: every collective DDP and FSDP rely on, in fp32/bf16/fp16, checked for exact values.

The inputs are small integers, so every expected value is exact in every dtype: any
difference is a broken transport or library, never rounding.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ddp_doctor.live.phases import PhaseContext, check
from ddp_doctor.rundir.records import CheckRecord

N = 1024  # elements per rank
_UNSUPPORTED = ("not supported", "unsupported", "does not support", "not implemented")


def _ops(ctx: PhaseContext, torch: Any, dist: Any, dtype: Any) -> dict[str, Callable[[], tuple[Any, Any]]]:
    r, w, dev = ctx.rank, ctx.world_size, ctx.device

    def full(value: float, n: int = N) -> Any:
        return torch.full((n,), value, dtype=dtype, device=dev)

    def reduce(op: Any, value: float, expected: float) -> Callable[[], tuple[Any, Any]]:
        def go() -> tuple[Any, Any]:
            t = full(value)
            dist.all_reduce(t, op=op)
            return t, full(expected)

        return go

    def broadcast() -> tuple[Any, Any]:
        ref = torch.arange(N, device=dev).remainder(128).to(dtype)
        t = ref.clone() if r == 0 else full(0)
        dist.broadcast(t, src=0)
        return t, ref

    def all_gather() -> tuple[Any, Any]:
        out = [full(-1) for _ in range(w)]
        dist.all_gather(out, full(r + 1))
        return torch.cat(out), torch.cat([full(s + 1) for s in range(w)])

    def reduce_scatter() -> tuple[Any, Any]:
        out = full(-1)
        dist.reduce_scatter(out, [full((r + 1) * (j + 1)) for j in range(w)])
        return out, full((r + 1) * w * (w + 1) / 2)

    def all_to_all() -> tuple[Any, Any]:
        out = [full(-1) for _ in range(w)]
        dist.all_to_all(out, [full((r * w + j) % 128) for j in range(w)])
        return torch.cat(out), torch.cat([full((s * w + r) % 128) for s in range(w)])

    def ring() -> tuple[Any, Any]:
        got = full(-1)
        ops = [dist.P2POp(dist.isend, full(r), (r + 1) % w), dist.P2POp(dist.irecv, got, (r - 1) % w)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        return got, full((r - 1) % w)

    ops = {
        "all_reduce_sum": reduce(dist.ReduceOp.SUM, r + 1, w * (w + 1) / 2),
        "all_reduce_avg": reduce(dist.ReduceOp.AVG, r + 1, (w + 1) / 2),
        "all_reduce_max": reduce(dist.ReduceOp.MAX, r + 1, w),
        "broadcast": broadcast,
        "all_gather": all_gather,
        "reduce_scatter": reduce_scatter,
        "all_to_all": all_to_all,
    }
    if w > 1:
        ops["send_recv_ring"] = ring
    return ops


# Each op's Result id, written out so that it can be grepped and is declared with its title in resultids.
OP_IDS = {
    "all_reduce_sum": "live.collectives.all_reduce_sum",
    "all_reduce_avg": "live.collectives.all_reduce_avg",
    "all_reduce_max": "live.collectives.all_reduce_max",
    "broadcast": "live.collectives.broadcast",
    "all_gather": "live.collectives.all_gather",
    "reduce_scatter": "live.collectives.reduce_scatter",
    "all_to_all": "live.collectives.all_to_all",
    "send_recv_ring": "live.collectives.send_recv_ring",
}


def _describe_mismatch(got: Any, want: Any) -> str:
    bad = (got != want).nonzero()
    i = int(bad[0][0]) if len(bad) else 0
    return f"{len(bad)} of {want.numel()} elements wrong; first at [{i}]: got {got[i].item()} expected {want[i].item()}"


def _run_ops(ctx: PhaseContext, torch: Any, dist: Any) -> tuple[dict[str, dict[str, str]], dict[str, float]]:
    """Every op in every dtype: op -> dtype -> "exact", what was wrong, or "unsupported: ..."; and each op's
    time over its dtypes in ms."""
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    results: dict[str, dict[str, str]] = {}
    timings: dict[str, float] = {}
    for dname, dtype in dtypes.items():
        for op, fn in _ops(ctx, torch, dist, dtype).items():
            ctx.step(f"{op}:{dname}")
            started = time.perf_counter()
            try:
                got, want = fn()
            except (RuntimeError, ValueError, TypeError) as exc:
                if any(s in str(exc).lower() for s in _UNSUPPORTED):
                    results.setdefault(op, {})[dname] = "unsupported: " + str(exc).splitlines()[0][:160]
                    continue
                raise
            if ctx.device.type == "cuda":
                torch.cuda.synchronize()
            timings[op] = timings.get(op, 0.0) + (time.perf_counter() - started) * 1000
            results.setdefault(op, {})[dname] = "exact" if torch.equal(got, want) else _describe_mismatch(got, want)
    return results, timings


def _op_check(ctx: PhaseContext, op: str, per_dtype: dict[str, str], time_ms: float) -> CheckRecord:
    wrong = {d: v for d, v in per_dtype.items() if v != "exact" and not v.startswith("unsupported")}
    exact = [d for d, v in per_dtype.items() if v == "exact"]
    unsupported = [d for d, v in per_dtype.items() if v.startswith("unsupported")]
    metrics = {"time_ms": round(time_ms, 3)}
    if wrong:
        return check(
            OP_IDS[op],
            "fail",
            f"{op} on rank {ctx.rank}: " + "; ".join(f"{d}: {v}" for d, v in wrong.items()),
            observed=per_dtype,
            expected={d: "exact" for d in per_dtype},
            metrics=metrics,
            cause=f"{op} returned wrong values over {ctx.backend}: a broken transport or library",
            remedy="run `ddp-doctor bench` to isolate the transport; check the NCCL/driver versions",
        )
    if not exact:
        return check(
            OP_IDS[op],
            "skip",
            f"{op}: not supported by {ctx.backend}",
            observed=per_dtype,
            metrics=metrics,
        )
    note = f" ({', '.join(unsupported)} unsupported by {ctx.backend})" if unsupported else ""
    return check(OP_IDS[op], "pass", f"{op} exact in {', '.join(exact)}{note}", observed=per_dtype, metrics=metrics)


def run(ctx: PhaseContext) -> list[CheckRecord]:
    import torch
    import torch.distributed as dist

    results, timings = _run_ops(ctx, torch, dist)
    ctx.step("barrier")
    dist.barrier()
    checks = [_op_check(ctx, op, per_dtype, timings.get(op, 0.0)) for op, per_dtype in results.items()]
    if ctx.world_size == 1:
        checks.append(check("live.collectives.send_recv_ring", "skip", "a send/recv ring needs at least 2 ranks"))
    checks.append(check("live.collectives.barrier", "pass", "barrier passed"))
    return checks
