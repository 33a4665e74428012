"""gpu_health (only with --gpu-health): the bench's GPU micro-benchmarks on this rank's GPU.

The numbers are judged in the parent by `ddp_doctor.health.gpu.evaluate` (data sheets, peers).
"""

from __future__ import annotations

from ddp_doctor.health.gpu import run_health
from ddp_doctor.live.phases import PhaseContext, check
from ddp_doctor.rundir.records import CheckRecord


def run(ctx: PhaseContext) -> list[CheckRecord]:
    if ctx.device is None or ctx.device.type != "cuda":
        ctx.payload["gpu_health"] = {"rank": ctx.rank, "skipped": "CPU rank: no GPU to measure"}
        return [check("live.gpu_health.run", "skip", "no GPU on this rank")]

    ctx.step("micro-benchmarks")
    try:
        numbers = run_health(ctx.device.index or 0)
    except RuntimeError as exc:  # a GPU that fails its benchmark is a finding, judged in the parent
        numbers = {"device_index": ctx.device.index, "error": str(exc)[:500]}
    numbers["rank"] = ctx.rank
    ctx.payload["gpu_health"] = numbers
    return [check("live.gpu_health.run", "pass", f"micro-benchmarks ran on cuda:{ctx.device.index}")]
