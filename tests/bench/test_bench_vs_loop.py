"""Issue 14 item 7 on a quiet machine: `ddp-doctor bench` and a minimal loop of plain synchronous
all_reduce calls agree within 5%. Re-judges the figures `gpu/bench_vs_loop.sh` recorded with
benchmarks/bench_vs_loop.py on the GPU machine's 16 idle cores (CPU ranks, gloo); this 2-core shared
machine cannot resolve 5% (docs/bench.md). Skipped, and not done, until that recording exists."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "bench_vs_loop" / "raw.json"
TARGET = 0.05


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    if not FIXTURE.exists():
        pytest.skip(f"not recorded yet: {FIXTURE} comes from gpu/bench_vs_loop.sh (the coordinator runs it)")
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def _median_ratios(part: dict[str, Any]) -> dict[str, float]:
    return {
        size: statistics.median(b / lp for b, lp in zip(v["bench"], v["loop"], strict=True))
        for size, v in part.items()
        if isinstance(v, dict) and "bench" in v
    }


def test_recorded_on_a_machine_that_can_resolve_five_percent(raw: dict[str, Any]) -> None:
    assert raw["cpus"] >= 8, raw["cpus"]
    assert {"same-job", "separate-jobs"} <= set(raw), sorted(raw)
    for part in ("same-job", "separate-jobs"):
        for v in raw[part].values():
            if isinstance(v, dict):
                assert len(v["bench"]) == len(v["loop"]) >= 5


@pytest.mark.parametrize("part", ["same-job", "separate-jobs"])
def test_bench_agrees_with_the_loop_within_five_percent(raw: dict[str, Any], part: str) -> None:
    ratios = _median_ratios(raw[part])
    assert ratios, part
    off = {size: round(r, 3) for size, r in ratios.items() if abs(1 - r) > TARGET}
    assert not off, f"{part}: median ratio bench/loop off by more than 5% at {off}"
