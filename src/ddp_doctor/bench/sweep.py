"""The collective sweep inside one rank (imports torch): buffers, timing loop, value checks.

Method as nccl-tests does it (src/common.cu, TimeTest and BenchTime): warm-up calls at the largest
and the smallest size before the sweep, then at each size warm-up calls, a barrier,
`iters` calls queued back to back, one synchronisation, the per-rank time averaged over ranks.
Every point is then verified once with inputs whose exact result is known (`--check`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ddp_doctor.bench import formulas
from ddp_doctor.bench.records import Point

TORCH_DTYPE = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Largest integer a dtype holds exactly: reduced values up to this compare exactly.
EXACT_INT = {"fp32": 1 << 24, "bf16": 256, "fp16": 2048}
EPS = {"fp32": 2.0**-23, "bf16": 2.0**-7, "fp16": 2.0**-10}

IN_PLACE, OUT_OF_PLACE = True, False

# Modes torch.distributed offers per op; the others are reported as not available.
MODES: dict[str, tuple[bool, ...]] = {
    "all_reduce": (IN_PLACE,),
    "broadcast": (IN_PLACE,),
    "reduce": (IN_PLACE,),
    "all_gather": (OUT_OF_PLACE, IN_PLACE),
    "reduce_scatter": (OUT_OF_PLACE, IN_PLACE),
    "all_to_all": (OUT_OF_PLACE,),
    "sendrecv": (OUT_OF_PLACE,),
    "barrier": (OUT_OF_PLACE,),
}

# torch 2.13 renamed the tensor forms (the old names warn); older torch has only the old ones.
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


@dataclass
class Ctx:
    rank: int
    world: int
    device: torch.device
    root: int = 0

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


@dataclass
class Buffers:
    """The tensors of one point; `send` may alias `recv` (in place)."""

    send: torch.Tensor
    recv: torch.Tensor
    call: Callable[[], None]
    fill: Callable[[], None]
    wrong: Callable[[], int]


def _idx(n: int, ctx: Ctx, offset: int = 0) -> torch.Tensor:
    return torch.arange(offset, offset + n, dtype=torch.int64, device=ctx.device)


def copy_pattern(rank: int, idx: torch.Tensor) -> torch.Tensor:
    """Values 1..251 that tell ranks apart; exact in every dtype we test."""
    return (rank * 7 + idx) % 251 + 1


def sum_pattern(rank: int, idx: torch.Tensor) -> torch.Tensor:
    """Values 1..3, small enough that sums over many ranks stay exact in bf16."""
    return (rank + idx) % 3 + 1


def sum_expected(nranks: int, idx: torch.Tensor) -> torch.Tensor:
    """sum over r < nranks of sum_pattern(r, idx), in closed form."""
    q, rem = divmod(nranks, 3)
    out = torch.full_like(idx, nranks + 3 * q)
    for j in range(rem):
        out += (idx + j) % 3
    return out


def _set(buf: torch.Tensor, values: torch.Tensor) -> None:
    buf.copy_(values)


def _count_wrong(got: torch.Tensor, expected_int: torch.Tensor, dtype: str, exact: bool) -> int:
    expected = expected_int.to(got.dtype)
    if exact:
        return int((got != expected).sum().item())
    # Sums past the dtype's exact range are rounded at each step of the reduction.
    tol = expected_int.abs().to(torch.float64) * EPS[dtype] * 8
    return int(((got.to(torch.float64) - expected_int.to(torch.float64)).abs() > tol).sum().item())


def _all_reduce_buffers(lay: formulas.Layout, dtype: str, inplace: bool, ctx: Ctx) -> Buffers:
    tdt, dev, r, n, c = TORCH_DTYPE[dtype], ctx.device, ctx.rank, ctx.world, lay.count
    exact_sum = 3 * n <= EXACT_INT[dtype]
    buf = torch.empty(c, dtype=tdt, device=dev)
    return Buffers(
        buf,
        buf,
        call=lambda: dist.all_reduce(buf),
        fill=lambda: _set(buf, sum_pattern(r, _idx(c, ctx))),
        wrong=lambda: _count_wrong(buf, sum_expected(n, _idx(c, ctx)), dtype, exact_sum),
    )


def _broadcast_buffers(lay: formulas.Layout, dtype: str, inplace: bool, ctx: Ctx) -> Buffers:
    tdt, dev, r, c = TORCH_DTYPE[dtype], ctx.device, ctx.rank, lay.count
    buf = torch.empty(c, dtype=tdt, device=dev)

    def fill_bcast() -> None:
        if r == ctx.root:
            buf.copy_(copy_pattern(ctx.root, _idx(c, ctx)))
        else:
            buf.zero_()

    return Buffers(
        buf,
        buf,
        call=lambda: dist.broadcast(buf, ctx.root),
        fill=fill_bcast,
        wrong=lambda: _count_wrong(buf, copy_pattern(ctx.root, _idx(c, ctx)), dtype, True),
    )


def _reduce_buffers(lay: formulas.Layout, dtype: str, inplace: bool, ctx: Ctx) -> Buffers:
    tdt, dev, r, n, c = TORCH_DTYPE[dtype], ctx.device, ctx.rank, ctx.world, lay.count
    exact_sum = 3 * n <= EXACT_INT[dtype]
    buf = torch.empty(c, dtype=tdt, device=dev)
    return Buffers(
        buf,
        buf,
        call=lambda: dist.reduce(buf, ctx.root),
        fill=lambda: _set(buf, sum_pattern(r, _idx(c, ctx))),
        # Only the root's buffer holds a defined result.
        wrong=lambda: _count_wrong(buf, sum_expected(n, _idx(c, ctx)), dtype, exact_sum) if r == ctx.root else 0,
    )


def _all_gather_buffers(lay: formulas.Layout, dtype: str, inplace: bool, ctx: Ctx) -> Buffers:
    tdt, dev, r, n, c = TORCH_DTYPE[dtype], ctx.device, ctx.rank, ctx.world, lay.count
    out = torch.empty(c * n, dtype=tdt, device=dev)
    inp = out.narrow(0, r * c, c) if inplace else torch.empty(c, dtype=tdt, device=dev)

    def expected_gather() -> torch.Tensor:
        return torch.cat([copy_pattern(s, _idx(c, ctx)) for s in range(n)])

    def fill_gather() -> None:
        out.zero_()
        inp.copy_(copy_pattern(r, _idx(c, ctx)))

    return Buffers(
        inp,
        out,
        call=lambda: _all_gather(out, inp),
        fill=fill_gather,
        wrong=lambda: _count_wrong(out, expected_gather(), dtype, True),
    )


def _reduce_scatter_buffers(lay: formulas.Layout, dtype: str, inplace: bool, ctx: Ctx) -> Buffers:
    tdt, dev, r, n, c = TORCH_DTYPE[dtype], ctx.device, ctx.rank, ctx.world, lay.count
    exact_sum = 3 * n <= EXACT_INT[dtype]
    inp = torch.empty(c * n, dtype=tdt, device=dev)
    out = inp.narrow(0, r * c, c) if inplace else torch.empty(c, dtype=tdt, device=dev)

    def fill_rs() -> None:
        if not inplace:
            out.zero_()
        inp.copy_(sum_pattern(r, _idx(c * n, ctx)))

    return Buffers(
        inp,
        out,
        call=lambda: _reduce_scatter(out, inp),
        fill=fill_rs,
        wrong=lambda: _count_wrong(out, sum_expected(n, _idx(c, ctx, r * c)), dtype, exact_sum),
    )


def _all_to_all_buffers(lay: formulas.Layout, dtype: str, inplace: bool, ctx: Ctx) -> Buffers:
    tdt, dev, r, n, c = TORCH_DTYPE[dtype], ctx.device, ctx.rank, ctx.world, lay.count
    inp = torch.empty(c * n, dtype=tdt, device=dev)
    out = torch.empty(c * n, dtype=tdt, device=dev)

    def expected_a2a() -> torch.Tensor:
        # Chunk s of my output is chunk r (mine) of rank s's input.
        return torch.cat([copy_pattern(s, _idx(c, ctx, r * c)) for s in range(n)])

    def fill_a2a() -> None:
        out.zero_()
        inp.copy_(copy_pattern(r, _idx(c * n, ctx)))

    return Buffers(
        inp,
        out,
        call=lambda: dist.all_to_all_single(out, inp),
        fill=fill_a2a,
        wrong=lambda: _count_wrong(out, expected_a2a(), dtype, True),
    )


def _sendrecv_buffers(lay: formulas.Layout, dtype: str, inplace: bool, ctx: Ctx) -> Buffers:
    tdt, dev, r, n, c = TORCH_DTYPE[dtype], ctx.device, ctx.rank, ctx.world, lay.count
    # A ring like nccl-tests' sendrecv_perf: send to rank+1, receive from rank-1.
    send = torch.empty(c, dtype=tdt, device=dev)
    recv = torch.empty(c, dtype=tdt, device=dev)
    peer_to, peer_from = (r + 1) % n, (r - 1 + n) % n

    def call_sr() -> None:
        ops = [dist.P2POp(dist.isend, send, peer_to), dist.P2POp(dist.irecv, recv, peer_from)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    def fill_sr() -> None:
        recv.zero_()
        send.copy_(copy_pattern(r, _idx(c, ctx)))

    return Buffers(
        send,
        recv,
        call=call_sr,
        fill=fill_sr,
        wrong=lambda: _count_wrong(recv, copy_pattern(peer_from, _idx(c, ctx)), dtype, True),
    )


def _barrier_buffers(lay: formulas.Layout, dtype: str, inplace: bool, ctx: Ctx) -> Buffers:
    dev = ctx.device
    empty = torch.empty(0, device=dev)
    return Buffers(empty, empty, call=lambda: dist.barrier(), fill=lambda: None, wrong=lambda: 0)


_BUILDERS: dict[str, Callable[[formulas.Layout, str, bool, Ctx], Buffers]] = {
    "all_reduce": _all_reduce_buffers,
    "broadcast": _broadcast_buffers,
    "reduce": _reduce_buffers,
    "all_gather": _all_gather_buffers,
    "reduce_scatter": _reduce_scatter_buffers,
    "all_to_all": _all_to_all_buffers,
    "sendrecv": _sendrecv_buffers,
    "barrier": _barrier_buffers,
}
"""One builder per collective: its buffers, the call, how to fill them and how to count wrong elements."""


def _buffers(op: str, lay: formulas.Layout, dtype: str, inplace: bool, ctx: Ctx) -> Buffers:
    build = _BUILDERS.get(op)
    if build is None:
        raise ValueError(f"unknown op {op!r}")
    return build(lay, dtype, inplace, ctx)


def unsupported_reason(op: str, world: int) -> str | None:
    if op == "sendrecv" and world < 2:
        return "send/recv needs at least 2 ranks (torch.distributed refuses to send to itself)"
    return None


def _all_ranks_sum(value: float, ctx: Ctx, dtype: torch.dtype = torch.float64) -> float:
    t = torch.tensor([value], dtype=dtype, device=ctx.device)
    dist.all_reduce(t)
    return float(t.item())


def time_point(bufs: Buffers, ctx: Ctx, iters: int, warmup: int) -> float:
    """Seconds per call, averaged over ranks."""
    bufs.fill()
    for _ in range(warmup):
        bufs.call()
    ctx.sync()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        bufs.call()
    ctx.sync()
    elapsed = (time.perf_counter() - start) / iters
    return _all_ranks_sum(elapsed, ctx) / ctx.world


def check_point(bufs: Buffers, ctx: Ctx) -> int:
    """Wrong elements over all ranks after one call on known inputs."""
    bufs.fill()
    ctx.sync()
    bufs.call()
    ctx.sync()
    return int(_all_ranks_sum(float(bufs.wrong()), ctx))


def warm_up(op: str, dtype: str, sizes: list[int], mode: bool, warmup: int, ctx: Ctx) -> None:
    """nccl-tests' TimeTest (src/common.cu) before its sweep: `warmup` calls at the largest size, then
    at the smallest, so the first point measured is not the first use of the transport, its buffers
    and the allocator's largest blocks (the per-size warm-up in time_point comes on top)."""
    elem = formulas.DTYPE_SIZE[dtype]
    for nbytes in dict.fromkeys((max(sizes), min(sizes))):
        lay = formulas.layout(op, nbytes, elem, ctx.world)
        if lay.count == 0:
            continue
        bufs = _buffers(op, lay, dtype, mode, ctx)
        bufs.fill()
        for _ in range(warmup):
            bufs.call()
        ctx.sync()
        del bufs


def sweep_op(
    op: str,
    dtype: str,
    sizes: list[int],
    modes: tuple[bool, ...],
    iters: int,
    warmup: int,
    check: bool,
    ctx: Ctx,
    progress: Callable[[str], None] | None = None,
) -> list[Point]:
    """One op over all sizes and modes; every rank returns the same (averaged) points."""
    points: list[Point] = []
    elem = formulas.DTYPE_SIZE[dtype]
    op_sizes = [0] if op == "barrier" else sizes
    if op != "barrier" and sizes and modes and warmup > 0:
        warm_up(op, dtype, sizes, modes[0], warmup, ctx)
    for nbytes in op_sizes:
        lay = formulas.layout(op, nbytes, elem, ctx.world)
        if op != "barrier" and lay.count == 0:
            continue
        for inplace in modes:
            if progress:
                progress(f"{op} {dtype} {lay.size_bytes} B {'in-place' if inplace else 'out-of-place'}")
            bufs = _buffers(op, lay, dtype, inplace, ctx)
            seconds = time_point(bufs, ctx, iters, warmup)
            wrong = check_point(bufs, ctx) if check else None
            size = lay.size_bytes
            points.append(
                Point(
                    bytes=size,
                    count=lay.count,
                    dtype=dtype,
                    inplace=inplace,
                    time_us=round(seconds * 1e6, 3),
                    algbw_gbps=round(formulas.algbw_gbps(size, seconds), 4) if op != "barrier" else 0.0,
                    busbw_gbps=round(formulas.busbw_gbps(op, size, seconds, ctx.world), 4) if op != "barrier" else 0.0,
                    wrong=wrong,
                    check_ok=None if wrong is None else wrong == 0,
                )
            )
            del bufs
    return points
