"""nccl-tests' definitions of size, count, algbw and busbw, so our numbers line up with theirs.

Source: NVIDIA/nccl-tests doc/PERFORMANCE.md ("Summary" of bus bandwidth factors) and the
`*GetCollByteCount` / `*GetBw` functions of src/all_reduce.cu, all_gather.cu, reduce_scatter.cu,
alltoall.cu, broadcast.cu, reduce.cu, sendrecv.cu; the reported size is
`max(sendBytes, recvBytes)` and the count is `paramcount` (src/common.cu, TimeTest).
GB/s are 1e9 bytes per second, time is the average over ranks (common.cu, `average = 1`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all", "sendrecv", "barrier")

# nccl-tests binary name -> our op name.
NCCL_TESTS_BINARIES = {
    "all_reduce_perf": "all_reduce",
    "all_gather_perf": "all_gather",
    "reduce_scatter_perf": "reduce_scatter",
    "broadcast_perf": "broadcast",
    "reduce_perf": "reduce",
    "alltoall_perf": "all_to_all",
    "sendrecv_perf": "sendrecv",
}

# The whole-buffer bytes an op moves are divided by t (algbw) and scaled by this (busbw).
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
    "barrier": lambda n: 0.0,
}

DTYPE_SIZE = {"fp32": 4, "bf16": 2, "fp16": 2}
# nccl-tests' type names, for the table and the importer.
NCCL_TYPE_NAME = {"fp32": "float", "bf16": "bfloat16", "fp16": "half"}
FROM_NCCL_TYPE = {"float": "fp32", "float32": "fp32", "bfloat16": "bf16", "half": "fp16", "float16": "fp16"}
REDOP = {"all_reduce": "sum", "reduce_scatter": "sum", "reduce": "sum"}  # others print "none"


@dataclass(frozen=True)
class Layout:
    """Buffer sizes for one point of the sweep, as nccl-tests' setupArgs computes them."""

    op: str
    nranks: int
    elem_size: int
    count: int
    """Elements per call argument (`paramcount`): per rank for all_gather / reduce_scatter / all_to_all."""
    send_elems: int
    recv_elems: int

    @property
    def size_bytes(self) -> int:
        """The `size` column: the larger of the send and receive buffers."""
        return max(self.send_elems, self.recv_elems) * self.elem_size


def layout(op: str, nbytes: int, elem_size: int, nranks: int) -> Layout:
    """Buffers for a requested size `nbytes` (per nccl-tests: the whole buffer, not per rank)."""
    total = nbytes // elem_size
    per_rank = total // nranks
    if op in ("all_reduce", "broadcast", "reduce", "sendrecv"):
        return Layout(op, nranks, elem_size, total, total, total)
    if op == "all_gather":
        return Layout(op, nranks, elem_size, per_rank, per_rank, per_rank * nranks)
    if op == "reduce_scatter":
        return Layout(op, nranks, elem_size, per_rank, per_rank * nranks, per_rank)
    if op == "all_to_all":
        return Layout(op, nranks, elem_size, per_rank, per_rank * nranks, per_rank * nranks)
    if op == "barrier":
        return Layout(op, nranks, elem_size, 0, 0, 0)
    raise ValueError(f"unknown op {op!r}")


def algbw_gbps(size_bytes: int, seconds: float) -> float:
    return size_bytes / 1e9 / seconds if seconds > 0 else 0.0


def busbw_gbps(op: str, size_bytes: int, seconds: float, nranks: int) -> float:
    return algbw_gbps(size_bytes, seconds) * BUS_FACTOR[op](nranks)


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """Factor-2 sweep from min to max inclusive (nccl-tests `-f 2`)."""
    out, size = [], max(1, min_bytes)
    while size <= max_bytes:
        out.append(size)
        size *= 2
    return out
