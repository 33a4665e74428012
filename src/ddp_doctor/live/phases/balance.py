"""balance: does every rank carry the same load? Per-rank step times, spread, a named straggler.

DDP's gradient all_reduce makes every rank wait for the slowest, so the synchronised step
times from the ddp phase look equal even with a straggler; here each rank also times its
own compute alone (forward+backward under no_sync), which is what differs on a slow GPU.
"""

from __future__ import annotations

import time
from typing import Any

from ddp_doctor.live import faults as faults_mod
from ddp_doctor.live.phases import all_gather_objects, check

STRAGGLER = 1.15  # a rank whose compute median is > 15% above the median rank
COMPUTE_STEPS = 20


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def run(ctx: Any) -> list[dict[str, Any]]:
    import torch

    from ddp_doctor.live.phases.ddp import IN, LOCAL_BATCH

    ddp = ctx.shared.get("ddp")
    if ddp is None:
        raise RuntimeError("balance needs the ddp phase to have run first")
    slow = faults_mod.slow_factor(ctx.faults, ctx.rank, "balance")
    # Enough work per step that timer and scheduler noise stay well below the 15% threshold.
    x = torch.randn(LOCAL_BATCH * 16, IN, device=ctx.device)
    compute_ms = []
    for i in range(COMPUTE_STEPS):
        ctx.step(f"compute:{i}")
        started = time.perf_counter()
        with ddp.no_sync():
            ddp(x).sum().backward()
        if ctx.device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - started
        if slow > 1.0:
            time.sleep(elapsed * (slow - 1.0))
            elapsed = time.perf_counter() - started
        compute_ms.append(elapsed * 1000)
    step_ms = ctx.shared.get("step_ms", [])[2:] or ctx.shared.get("step_ms", [])
    mine = {
        "rank": ctx.rank,
        "node": ctx.node,
        "step_ms_median": round(_median(step_ms), 3),
        "step_ms_p95": round(_p95(step_ms), 3),
        "compute_ms_median": round(_median(compute_ms[2:]), 3),
        "compute_ms_p95": round(_p95(compute_ms[2:]), 3),
        "nvml": (ctx.payload.get("ddp") or {}).get("nvml"),
        "device": ctx.payload.get("device"),
    }
    ctx.step("gather")
    everyone = all_gather_objects(ctx, mine)
    ctx.payload["balance"] = {"ranks": everyone}
    medians = [e["compute_ms_median"] for e in everyone]
    middle = _median(medians)
    slowest = max(everyone, key=lambda e: e["compute_ms_median"])
    spread = (max(medians) - min(medians)) / middle if middle > 0 else 0.0
    metrics = {
        "step_ms_median": mine["step_ms_median"],
        "step_ms_p95": mine["step_ms_p95"],
        "compute_ms_median": mine["compute_ms_median"],
        "compute_spread_pct": round(100 * spread, 1),
    }
    per_rank = "; ".join(f"rank {e['rank']} {e['step_ms_median']}/{e['step_ms_p95']} ms" for e in everyone)
    checks = [
        check(
            "live.balance.step_time",
            "pass",
            f"DDP step median/p95: {per_rank}; compute spread across ranks {100 * spread:.1f}%",
            metrics=metrics,
            observed={"ranks": everyone},
        )
    ]
    ratio = slowest["compute_ms_median"] / middle if middle > 0 else 1.0
    if ctx.world_size > 1 and ratio > STRAGGLER:
        checks.append(
            check(
                "live.balance.straggler",
                "warn",
                f"rank {slowest['rank']} ({slowest['node']}) computes {100 * (ratio - 1):.0f}% slower than the "
                f"median rank ({slowest['compute_ms_median']} vs {middle} ms); expected within "
                f"{100 * (STRAGGLER - 1):.0f}%",
                observed={"rank": slowest["rank"], "ratio": round(ratio, 3)},
                expected={"max_ratio": STRAGGLER},
                metrics={"straggler_ratio": round(ratio, 3)},
                cause="one rank is slower: a throttled or shared GPU, a busy CPU core, or a slower link",
                remedy="compare `nvidia-smi -q -d PERFORMANCE,CLOCK` across GPUs and check what else runs there; "
                "`ddp-doctor check --gpu-health` measures each GPU",
            )
        )
    else:
        checks.append(
            check(
                "live.balance.straggler",
                "pass",
                f"no straggler: the slowest rank is within {100 * (ratio - 1):.0f}% of the median "
                f"(threshold {100 * (STRAGGLER - 1):.0f}%)",
                metrics={"straggler_ratio": round(ratio, 3)},
            )
        )
    util = [e["nvml"] for e in everyone if e.get("nvml") and e["nvml"].get("samples")]
    if util:
        means = [u["util_mean_pct"] for u in util]
        checks.append(
            check(
                "live.balance.gpu_util",
                "pass",
                f"GPU utilisation during ddp: {', '.join(f'{m:.0f}%' for m in means)} (per rank), "
                f"memory max {max(u['mem_max_bytes'] for u in util) / 2**30:.2f} GiB",
                observed={"per_rank": util},
                metrics={"util_spread_pct": round(max(means) - min(means), 1)},
            )
        )
    return checks
