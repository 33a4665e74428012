"""The rank side: what a rank started by live.launch writes into its run directory.

    from ddp_doctor.rundir import writer
    writer.heartbeat("collectives", step="all_reduce")   # where this rank is, for the parent
    writer.write_result(RankResult.of(payload))         # rank-N.json, atomically

Every file is replaced by an atomic rename, so the parent never reads half a file even when a rank
is killed mid-write.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ddp_doctor.rundir import layout
from ddp_doctor.rundir.jsonfile import write_atomic
from ddp_doctor.rundir.records import Heartbeat, RankResult

_progress = itertools.count(1)


@dataclass
class _Phase:
    """The phase of this rank's last heartbeat (one per rank process, changed as the rank goes)."""

    name: str = ""
    since: float = 0.0
    """Epoch seconds when it began."""
    deadline: float | None = None


_phase = _Phase()


def run_dir() -> Path:
    value = os.environ.get(layout.RUN_DIR_ENV)
    if not value:
        raise RuntimeError(
            f"{layout.RUN_DIR_ENV} is not set: this entry point must be started by ddp_doctor.live.launch"
        )
    return Path(value)


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def path(kind: str, rank_: int | None = None) -> Path:
    """run_dir/rank-N.<kind> of this rank (or of rank_)."""
    return layout.rank_file(run_dir(), rank() if rank_ is None else rank_, kind)


def heartbeat(phase: str, step: str | None = None, deadline: float | None = None) -> None:
    """Record where this rank is. `progress` only grows, so the rank with the lowest one is the laggard.
    `since` is when this phase began and `deadline` (epoch seconds) when it must end: the parent shows them."""
    now = time.time()
    if _phase.name != phase:
        _phase.name, _phase.since, _phase.deadline = phase, now, None
    if deadline is not None and deadline != float("inf"):
        _phase.deadline = deadline
    beat = Heartbeat(
        phase=phase,
        step=step,
        time=now,
        pid=os.getpid(),
        progress=next(_progress),
        since=_phase.since,
        deadline=_phase.deadline,
    )
    write_atomic(path("hb"), beat.to_json())


def write_result(result: RankResult) -> None:
    write_atomic(path("json"), result.to_json())
