"""Issue 14 item 7 on a quiet machine: `ddp-doctor bench` against a minimal loop of plain synchronous
all_reduce calls (CPU ranks, gloo). Re-judges what `gpu/bench_vs_loop.sh` recorded with
benchmarks/bench_vs_loop.py on the GPU machine's 16 idle cores (this 2-core shared machine cannot
resolve 5%, docs/bench.md):

- raw.json: 6 rounds x 20 iters of every part (same job, separate jobs, pinned, first size);
- raw-same-job-200-iters.json: the same-job part again, 9 rounds x 200 iters.

What they show: inside one job, bench's timing code and the loop agree within 5% (median over the 15
rounds of both recordings), while two jobs of the *same* method differ by more than 5%; so separate
single jobs (the issue's 1.48 vs 1.11 GB/s) cannot resolve a 5% difference, and their median ratio
stays inside that job-to-job spread."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "bench_vs_loop"
RECORDINGS = ("raw.json", "raw-same-job-200-iters.json")
TARGET = 0.05


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / name).read_text())
    return data


def sizes(part: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    return {size: v for size, v in part.items() if isinstance(v, dict) and "bench" in v}


def ratios(v: dict[str, list[float]]) -> list[float]:
    return [b / lp for b, lp in zip(v["bench"], v["loop"], strict=True)]


def spread(values: list[float]) -> float:
    return max(values) / min(values)


@pytest.mark.parametrize("name", RECORDINGS)
def test_recorded_on_a_quiet_machine_that_can_resolve_five_percent(name: str) -> None:
    raw = load(name)
    assert raw["cpus"] >= 8 and raw["loadavg_start"][0] < 4, (raw["cpus"], raw["loadavg_start"])
    for v in sizes(raw["same-job"]).values():
        assert len(v["bench"]) == len(v["loop"]) >= 6


def test_same_job_bench_and_loop_agree_within_five_percent() -> None:
    pooled: dict[str, list[float]] = {}
    for name in RECORDINGS:
        for size, v in sizes(load(name)["same-job"]).items():
            pooled.setdefault(size, []).extend(ratios(v))
    assert set(pooled) == {str(1 << 20), str(16 << 20), str(64 << 20)}
    medians = {size: round(statistics.median(r), 3) for size, r in pooled.items()}
    off = {size: m for size, m in medians.items() if abs(1 - m) > TARGET}
    assert not off, f"median ratio bench/loop over {len(pooled[str(1 << 20)])} rounds off by more than 5%: {off}"


def test_separate_jobs_differ_less_than_two_jobs_of_the_same_method() -> None:
    part = sizes(load("raw.json")["separate-jobs"])
    assert part
    for size, v in part.items():
        own = min(spread(v["bench"]), spread(v["loop"]))
        # Two jobs of one method differ by more than the 5% target: one pair of jobs cannot resolve it ...
        assert own > 1 + TARGET, (size, own)
        # ... and bench against the loop is inside that job-to-job noise.
        deviation = abs(1 - statistics.median(ratios(v)))
        assert deviation < own - 1, (size, deviation, own)
