"""The balance phase's verdicts from per-rank numbers: a straggler must repeat beyond the measured
noise (stable on a loaded 2-core machine), CPU ranks get CPU advice, and another tenant's GPU load
is named as such instead of being reported as this job's even load."""

from __future__ import annotations

from typing import Any

from ddp_doctor.live.phases.balance import gpu_util_check, straggler_check, threshold

GiB = 1 << 30


def rank(
    r: int, median: float, halves: tuple[float, float] | None = None, inter: tuple[float, float] | None = None
) -> dict[str, Any]:
    return {
        "compute_ms_interleaved": list(inter or (median, median)),
        "rank": r,
        "node": "n",
        "compute_ms_median": median,
        "compute_ms_halves": list(halves or (median, median)),
        "step_ms_median": 10.0,
        "step_ms_p95": 12.0,
    }


def test_a_gap_that_does_not_repeat_is_noise() -> None:
    # rank 1 was slow in the first half only (a burst of load from another process), 17% overall
    everyone = [rank(0, 10.0), rank(1, 14.0, halves=(18.0, 10.2))]
    c = straggler_check(everyone, 2, "cpu")
    assert c.status == "pass" and "did not repeat" in c.summary


def test_noisy_machine_raises_the_threshold() -> None:
    # rank 0's odd and even steps have medians 30% apart: a 17% gap between ranks is within that
    everyone = [rank(0, 10.0, inter=(8.5, 11.5)), rank(1, 14.0)]
    assert abs(threshold(everyone) - 1.6) < 1e-9
    c = straggler_check(everyone, 2, "cpu")
    assert c.status == "pass" and "threshold 60%" in c.summary


def test_a_real_straggler_repeats_and_on_cpu_gets_cpu_advice() -> None:
    everyone = [rank(0, 10.0), rank(1, 30.0, halves=(29.0, 31.0))]
    c = straggler_check(everyone, 2, "cpu")
    assert c.status == "warn" and c.observed["rank"] == 1
    assert "nvidia-smi" not in (c.remedy or "") and "taskset" in (c.remedy or "")
    g = straggler_check(everyone, 2, "cuda")
    assert g.status == "warn" and "nvidia-smi" in (g.remedy or "")


def _nvml(util: float, mem: float) -> dict[str, Any]:
    return {"samples": 20, "util_mean_pct": util, "util_max_pct": util, "mem_max_bytes": mem, "error": None}


def test_other_tenant_load_is_named_not_reported_as_even_load() -> None:
    me = {**rank(0, 10.0), "device": {"uuid": "0d1f7c2a-1111"}, "nvml": _nvml(100.0, 105 * GiB)}
    before = {"GPU-0d1f7c2a-1111": {"memory_used_bytes": 103 * GiB, "util_pct": 100.0, "processes": [{"pid": 4242}]}}
    c = gpu_util_check([me], before)
    assert c is not None and c.status == "warn"
    assert "pid 4242" in c.summary and "103.0 GiB" in c.summary
    assert "this job 2.00 GiB" in c.summary


def test_idle_gpus_before_the_run_pass() -> None:
    me = {**rank(0, 10.0), "device": {"uuid": "abc"}, "nvml": _nvml(90.0, 3 * GiB)}
    c = gpu_util_check([me], {"GPU-abc": {"memory_used_bytes": 500 << 20, "util_pct": 0.0, "processes": []}})
    assert c is not None and c.status == "pass" and "idle before the run" in c.summary
    assert gpu_util_check([rank(0, 1.0)], {}) is None
