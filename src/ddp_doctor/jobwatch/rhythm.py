"""When to look at a quiet job: a threshold learned from the job's own rhythm of progress.

Progress is a collective issued on any process group by any rank (the ranks' heartbeats), or, in a
job where no collective has been seen (no hook, before init_process_group), a line of output. After a
warm-up of WARMUP_INTERVALS intervals between progress events, a silence longer than
max(floor, k x the high percentile of the recent intervals) is a suspected hang and the ranks are
examined (hang.judge decides). Before the warm-up the start-up allowance holds (imports, rendezvous,
the first batch, the first compile). While the stack samples show a rank in a phase that is slow
without being stuck (compiling, a checkpoint, loading data, evaluating, process-group init), that
phase's allowance holds instead of the step rhythm. A fixed --hang-after replaces all of it.

CPU time and GPU utilisation are not progress events here: a rank spinning on a CUDA stream or an
NCCL kernel that never ends moves them as a healthy step does. They are read at the examination.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

WARMUP_INTERVALS = 10
"""Intervals seen before the learned threshold replaces the start-up allowance (init and the first
steps give a few short ones; a step rhythm needs several)."""
WINDOW = 512
"""The recent intervals the percentile is taken over (a rhythm that changes is followed)."""
PERCENTILE = 0.95

PHASE_ALLOWANCE_S: dict[str, float] = {
    "compile": 600.0,  # torch.compile of a large model: minutes on the first step, again on a recompile
    "checkpoint": 600.0,  # torch.save / torch.distributed.checkpoint of a large model to a network filesystem
    "data": 300.0,  # a DataLoader's first batch (worker start, shard download, cache fill)
    "eval": 600.0,  # an evaluation loop, often without a single collective
    "init": 600.0,  # init_process_group waiting for its peers (torch's default timeout is 10 min)
    "import": 300.0,
}
"""A phase seen in a rank's sampled stack (stacks.classify) holds off the look this long."""


@dataclass(frozen=True)
class RhythmConfig:
    floor_s: float = 15.0
    """The learned threshold is never below this."""
    k: float = 5.0
    """The threshold is k x the high percentile of the intervals between progress events."""
    start_s: float = 180.0
    """Before the warm-up: the start-up allowance."""
    fixed_s: float | None = None
    """--hang-after: a fixed threshold, nothing learned."""

    def __post_init__(self) -> None:
        if self.floor_s <= 0 or self.k <= 0 or self.start_s <= 0 or (self.fixed_s is not None and self.fixed_s <= 0):
            raise ValueError("hang thresholds must be positive")


@dataclass(frozen=True)
class Threshold:
    seconds: float
    why: str
    """How it was set, for the report: 'learned: 5 x p95 of 212 intervals (0.5 s), floor 15 s'."""


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class Rhythm:
    """Progress events in, the threshold for the current silence out."""

    def __init__(self, cfg: RhythmConfig) -> None:
        self.cfg = cfg
        self.intervals: deque[float] = deque(maxlen=WINDOW)
        self.seen = 0
        self.last: float | None = None

    def event(self, t: float) -> None:
        if self.last is not None and t > self.last:
            self.intervals.append(t - self.last)
            self.seen += 1
        self.last = t if self.last is None else max(self.last, t)

    def learned(self) -> Threshold | None:
        if self.seen < WARMUP_INTERVALS:
            return None
        high = percentile(list(self.intervals), PERCENTILE)
        seconds = max(self.cfg.floor_s, self.cfg.k * high)
        return Threshold(
            seconds,
            f"learned: {self.cfg.k:g} x p{PERCENTILE * 100:.0f} of {len(self.intervals)} intervals between "
            f"progress events ({high:.2g} s), floor {self.cfg.floor_s:g} s",
        )

    def threshold(self, phases: dict[int, str]) -> Threshold:
        """phases: rank -> the phase its latest stack sample shows (only the recognised ones)."""
        if self.cfg.fixed_s is not None:
            return Threshold(self.cfg.fixed_s, f"fixed: --hang-after {self.cfg.fixed_s:g}")
        learned = self.learned()
        base = learned or Threshold(
            self.cfg.start_s,
            f"start-up allowance {self.cfg.start_s:g} s ({self.seen} of {WARMUP_INTERVALS} warm-up intervals seen)",
        )
        slow = {r: p for r, p in phases.items() if PHASE_ALLOWANCE_S.get(p, 0.0) > base.seconds}
        if not slow:
            return base
        rank, phase = max(slow.items(), key=lambda rp: PHASE_ALLOWANCE_S[rp[1]])
        return Threshold(PHASE_ALLOWANCE_S[phase], f"{phase} allowance {PHASE_ALLOWANCE_S[phase]:g} s (rank {rank})")
