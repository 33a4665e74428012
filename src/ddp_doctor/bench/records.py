"""The records of `bench` that cross the process boundary: the sweep the parent sends each rank, what a rank writes into its result file and the parent reads back, and
the size points a result carries in `observed["points"]` (from our ranks or an imported nccl-tests log).

TypedDicts because the shape is the JSON's: the rank writes them with json.dump, the parent reads them
with json.load, and a report read back by `render` or `--baseline` holds the same dicts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TypedDict

from ddp_doctor.health.gpu import GpuHealth


class Point(TypedDict, total=False):
    """One message size of one op, in one mode (in place or not): nccl-tests' row half."""

    bytes: int
    count: int
    dtype: str
    inplace: bool
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None
    """Elements that differed from the expected values; None when not checked."""
    check_ok: bool | None
    max_error: float
    """Old nccl-tests logs print a max error instead of a count of wrong elements."""


class OpEntry(TypedDict, total=False):
    """One op (and dtype) of a rank's sweep."""

    op: str
    dtype: str
    status: str
    """ok, unsupported or error."""
    reason: str
    points: list[Point]
    error: str
    traceback: str
    duration_s: float


class DeviceFacts(TypedDict, total=False):
    """The device a rank ran on."""

    torch: str
    device: str
    name: str
    memory_bytes: int
    compute_capability: str
    nccl: str | None


class RankPayload(TypedDict, total=False):
    """A bench rank's result file (rank-N.json); rewritten after every op so a later hang keeps them."""

    rank: int
    world_size: int
    pid: int
    backend: str
    facts: DeviceFacts
    ops: list[OpEntry]
    health: GpuHealth
    finished: bool


@dataclass(frozen=True)
class RankSweep:
    """One rank's sweep, sent by the parent (bench/run.py SweepSpec.worker_config) as the rank's --config
    JSON and read once at the top of the rank's main()."""

    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    sizes: tuple[int, ...]
    modes: tuple[bool, ...]
    """True = in place, False = out of place."""
    iters: int
    warmup_iters: int
    check: bool
    backend: str
    gpu_health: bool = False
    pg_timeout_s: float = 120.0
    """The process group's timeout, below the launch deadline."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> RankSweep:
        data = json.loads(text)
        for name in ("ops", "dtypes", "sizes", "modes"):
            data[name] = tuple(data[name])
        return cls(**data)
