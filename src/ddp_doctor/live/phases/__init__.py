"""The phases of the live chain, one module each; each has `run(ctx) -> list[CheckRecord]`.

A CheckRecord (rundir/records.py) is what the parent reads back: id, status (pass|warn|fail|skip),
summary, observed, expected, metrics, cause, remedy. A phase raises when it cannot go on; the
worker records the exception as the phase's failure.
"""

from __future__ import annotations

import importlib
import pickle
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Protocol

from ddp_doctor.live.faults import Fault
from ddp_doctor.live.rankconfig import RankConfig
from ddp_doctor.rundir.records import CheckRecord


def load(name: str) -> ModuleType:
    return importlib.import_module(f"ddp_doctor.live.phases.{name}")


def check(
    id: str,
    status: str,
    summary: str,
    *,
    observed: Mapping[str, Any] | None = None,
    expected: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    cause: str | None = None,
    remedy: str | None = None,
) -> CheckRecord:
    return CheckRecord(id, status, summary, observed or {}, expected or {}, metrics or {}, cause, remedy)


@dataclass
class Shared:
    """What a phase leaves for a later one on the same rank."""

    prewarm: threading.Thread | None = None
    """The thread importing torch._dynamo for DDP() (the worker starts it; dataloader waits for it)."""
    step_ms: list[float] = field(default_factory=list)
    """Each DDP step's time (ddp), for balance."""
    ddp: Any = None
    """The DDP-wrapped model (ddp), which balance times again; torch's type, so Any on this side."""


class PhaseContext(Protocol):
    """What a phase may read and write of its rank (worker.Context is the one that runs)."""

    config: RankConfig
    backend: str
    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node: str
    payload: dict[str, Any]
    """What the phase reports besides its checks, under its own key (the rank result's body: JSON)."""
    faults: list[Fault]
    deadline: float
    """Epoch seconds by which the whole chain must end on this rank."""
    phase_deadline: float
    device: Any
    """The rank's torch.device once init has set it (torch's type: the parent side never imports torch)."""
    shared: Shared

    def step(self, name: str) -> None: ...

    def remaining(self) -> float: ...


class PhaseError(RuntimeError):
    """A phase cannot go on for a reason it understands: it says why and what to do."""

    def __init__(self, message: str, cause: str, remedy: str):
        super().__init__(message)
        self.cause = cause
        self.remedy = remedy


class PeerError(RuntimeError):
    """This rank failed because of other ranks (they never joined, died or hung): not a root cause."""

    def __init__(self, message: str, blame_ranks: list[int]):
        super().__init__(message)
        self.blame_ranks = blame_ranks


def all_gather_objects(ctx: PhaseContext, obj: Any) -> list[Any]:
    """dist.all_gather_object without numpy.

    torch's own version turns the received bytes back through `tensor.numpy()`, so it raises
    "Numpy is not available" in the many images that ship torch without numpy.
    """
    import torch
    import torch.distributed as dist

    data = pickle.dumps(obj)
    size = torch.tensor([len(data)], dtype=torch.int64, device=ctx.device)
    sizes = [torch.zeros_like(size) for _ in range(ctx.world_size)]
    dist.all_gather(sizes, size)
    lengths = [int(s.item()) for s in sizes]
    buf = torch.zeros(max(lengths), dtype=torch.uint8, device=ctx.device)
    buf[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(ctx.device)
    bufs = [torch.empty_like(buf) for _ in range(ctx.world_size)]
    dist.all_gather(bufs, buf)
    return [pickle.loads(bytes(b[:n].cpu().tolist())) for b, n in zip(bufs, lengths)]
