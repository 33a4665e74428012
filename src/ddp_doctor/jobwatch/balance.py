"""Even load: the straggler verdict from sampled stacks, step rates from the ranks' output.

In synchronous data-parallel training every rank runs at the slowest rank's pace, so step rates
are equal; the straggler shows as the rank that never waits. Each sample classifies every rank's
main thread; a rank's wait share = samples inside a collective (or autograd, where DDP's all-reduce
waits) / all its samples. The straggler's share is far below the others'.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ddp_doctor.words import plural

MIN_SAMPLES = 5
GAP = 0.3
"""A rank is the straggler when it waits at least this much less (as a share) than the least-waiting other rank."""


@dataclass
class WaitShares:
    samples: dict[int, int] = field(default_factory=dict)
    waiting: dict[int, int] = field(default_factory=dict)
    elsewhere: dict[int, Counter[str]] = field(default_factory=dict)

    def add(self, rank: int, kind: str, where: str | None) -> None:
        self.samples[rank] = self.samples.get(rank, 0) + 1
        if kind in ("collective", "backward"):
            self.waiting[rank] = self.waiting.get(rank, 0) + 1
        elif where:
            self.elsewhere.setdefault(rank, Counter())[where] += 1

    def shares(self) -> dict[int, float]:
        return {r: self.waiting.get(r, 0) / n for r, n in self.samples.items() if n}


@dataclass(frozen=True)
class Straggler:
    rank: int | None
    shares: dict[int, float]
    samples: dict[int, int]
    where: str | None
    message: str


def _samples_text(samples: dict[int, int]) -> str:
    """'none', 'rank 0: 1, rank 1: 1'"""
    return ", ".join(f"rank {r}: {n}" for r, n in sorted(samples.items())) or "none"


def straggler(w: WaitShares) -> Straggler:
    shares = w.shares()
    samples = dict(w.samples)
    if len(shares) < 2 or min(samples.values()) < MIN_SAMPLES:
        return Straggler(
            None,
            shares,
            samples,
            None,
            f"too few stack samples to judge ({_samples_text(samples)}; {MIN_SAMPLES} a rank needed)",
        )
    ordered = sorted(shares, key=lambda r: shares[r])
    low = ordered[0]
    rest = [shares[r] for r in ordered[1:]]
    pct = ", ".join(f"rank {r} {shares[r]:.0%}" for r in sorted(shares))
    if min(rest) - shares[low] >= GAP:
        top = w.elsewhere.get(low, Counter()).most_common(1)
        where = top[0][0] if top else None
        return Straggler(
            low,
            shares,
            samples,
            where,
            f"rank {low} is the straggler: it waited in collectives {shares[low]:.0%} of {plural(samples[low], 'sample')}, "
            f"the other ranks {min(rest):.0%}-{max(rest):.0%} ({pct})"
            + (f"; its time goes to {where}" if where else ""),
        )
    return Straggler(None, shares, samples, None, f"no straggler: ranks wait a similar share of the time ({pct})")


def step_rates(steps: dict[int, list[tuple[float, int]]]) -> dict[int, dict[str, float]]:
    """rank -> {steps, steps_per_s} from the step numbers its output printed."""
    out: dict[int, dict[str, float]] = {}
    for rank, seen in steps.items():
        if len(seen) < 2:
            continue
        (t0, s0), (t1, s1) = seen[0], seen[-1]
        if t1 > t0 and s1 > s0:
            out[rank] = {"steps_seen": float(len(seen)), "steps_per_s": round((s1 - s0) / (t1 - t0), 3)}
    return out


@dataclass(frozen=True)
class GpuBalance:
    uneven: bool
    spread_pct: float
    """Points of mean utilisation between the busiest and the idlest GPU."""


def gpu_balance(summary: dict[int, dict[str, float]]) -> GpuBalance:
    if len(summary) < 2:
        return GpuBalance(uneven=False, spread_pct=0.0)
    means = [s["util_mean_pct"] for s in summary.values()]
    spread = max(means) - min(means)
    return GpuBalance(uneven=spread > 20.0, spread_pct=round(spread, 1))
