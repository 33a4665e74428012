"""torchrun entry module of `ddp-doctor bench`: one rank's sweep, written to rank-N.json.

    torchrun ... -m ddp_doctor.bench.worker --config '{"ops": [...], "sizes": [...], ...}'

Started by `ddp_doctor.live.launch`; the parent merges the ranks' payloads (bench/results.py).
"""

from __future__ import annotations

import argparse
import datetime
import faulthandler
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Any

from ddp_doctor.bench.records import DeviceFacts, OpEntry, RankPayload, RankSweep
from ddp_doctor.health import gpu as health
from ddp_doctor.health.gpu import GpuHealth
from ddp_doctor.live import faults as faults_mod
from ddp_doctor.live import worker as live_worker
from ddp_doctor.rundir import writer
from ddp_doctor.rundir.records import RankResult


def _stack_dumps_on_sigusr1() -> None:
    # The launcher sends SIGUSR1 to a stuck rank and reads rank-N.stack.
    try:
        f = open(writer.path("stack"), "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the rank
        faulthandler.register(signal.SIGUSR1, file=f, all_threads=True)
    except (OSError, RuntimeError, AttributeError):
        pass


def _device_facts(torch: Any, device: Any) -> DeviceFacts:
    facts = DeviceFacts(torch=torch.__version__, device=str(device))
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(
            DeviceFacts(
                name=props.name, memory_bytes=int(props.total_memory), compute_capability=f"{props.major}.{props.minor}"
            )
        )
        try:
            facts["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001 - a CPU-only or odd build has no NCCL version
            facts["nccl"] = None
    else:
        facts["name"] = "cpu"
    return facts


def run(cfg: RankSweep) -> RankPayload:
    writer.heartbeat("init")
    import torch
    import torch.distributed as dist

    # Imports torch at its top: only once this rank has said it is starting and its output goes to its log.
    from ddp_doctor.bench import sweep

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = _init_process_group(cfg, torch, dist, local_rank=int(os.environ.get("LOCAL_RANK", "0")))
    ctx = sweep.Ctx(rank=rank, world=world, device=device)
    payload = RankPayload(
        rank=rank,
        world_size=world,
        pid=os.getpid(),
        backend=cfg.backend,
        facts=_device_facts(torch, device),
        ops=[],
        finished=False,
    )
    dist.barrier()

    if cfg.gpu_health:
        writer.heartbeat("gpu_health")
        payload["health"] = _health(ctx, dist)

    # The live chain's test-only fault switch (DDP_DOCTOR_FAULT), with the op names as phases.
    faults = faults_mod.parse(os.environ.get(faults_mod.ENV))
    for op in cfg.ops:
        faults_mod.trigger(faults, rank, op)
        # A barrier moves no data: once, whatever the dtypes.
        for dtype in cfg.dtypes[:1] if op == "barrier" else cfg.dtypes:
            writer.heartbeat("bench", step=f"{op} {dtype}")
            payload["ops"].append(_sweep_op(cfg, op, dtype, sweep, ctx))
            writer.write_result(RankResult.of(payload))  # partial results survive a later hang

    payload["finished"] = True
    writer.write_result(RankResult.of(payload))
    writer.heartbeat("done")
    dist.destroy_process_group()
    return payload


def _init_process_group(cfg: RankSweep, torch: Any, dist: Any, local_rank: int) -> Any:
    """The process group, and the device this rank measures on."""
    timeout = datetime.timedelta(seconds=cfg.pg_timeout_s)
    if cfg.backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        # device_id: the communicator is created now, not inside the first timed call.
        dist.init_process_group("nccl", timeout=timeout, device_id=device)
        return device
    dist.init_process_group(cfg.backend, timeout=timeout)
    return torch.device("cpu")


def _sweep_op(cfg: RankSweep, op: str, dtype: str, sweep: Any, ctx: Any) -> OpEntry:
    """One op in one dtype over every size; a failure is the entry's error, never the rank's end."""
    entry = OpEntry(op=op, dtype=dtype)
    reason = sweep.unsupported_reason(op, ctx.world)
    # A barrier has no buffers, hence no in-place question.
    modes = sweep.MODES[op] if op == "barrier" else tuple(m for m in sweep.MODES[op] if m in cfg.modes)
    if reason is None and not modes:
        wanted = " and ".join("in-place" if m else "out-of-place" for m in cfg.modes)
        reason = f"torch.distributed has no {wanted} form of {op}"
    if reason:
        entry.update(OpEntry(status="unsupported", reason=reason, points=[]))
        return entry
    started = time.monotonic()
    try:
        points = sweep.sweep_op(
            op,
            dtype,
            list(cfg.sizes),
            modes,
            cfg.iters,
            cfg.warmup_iters,
            cfg.check,
            ctx,
            progress=lambda s: writer.heartbeat("bench", step=s),
        )
        entry.update(OpEntry(status="ok", points=points))
    except Exception as exc:  # noqa: BLE001 - one op failing must not lose the others
        entry.update(
            OpEntry(
                status="error",
                points=[],
                error=f"{type(exc).__name__}: {exc}".strip()[:2000],
                traceback=traceback.format_exc()[-4000:],
            )
        )
    entry["duration_s"] = round(time.monotonic() - started, 3)
    return entry


def _health(ctx: Any, dist: Any) -> GpuHealth:
    if ctx.device.type != "cuda":
        return GpuHealth(skipped="no CUDA device in this rank")
    result: GpuHealth
    try:
        result = health.run_device_local(ctx.device.index)
    except Exception as exc:  # noqa: BLE001 - reported as an error result, not a crash
        result = GpuHealth(error=f"{type(exc).__name__}: {exc}"[:2000])
    # Host<->device copies share PCIe root ports and host memory: one GPU at a time. Every rank
    # takes part in every barrier, whatever failed, so none is left waiting.
    for turn in range(ctx.world):
        if turn == ctx.rank and "error" not in result:
            try:
                result.update(health.run_host_copies(ctx.device.index))
            except Exception as exc:  # noqa: BLE001
                result["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        dist.barrier()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    # The live chain's rank plumbing: started by torchrun, output into rank-N.log (read back by the
    # launcher for diagnosis), dies with torchrun, uncaught errors into rank-N.error.json.
    parser = argparse.ArgumentParser(prog="ddp_doctor.bench.worker")
    parser.add_argument("--config", required=True, help="the sweep as JSON")
    args = parser.parse_args(argv)
    problem = live_worker.check_launched_by_torchrun()
    if problem:
        print(f"ddp_doctor.bench.worker: {problem.replace('ddp_doctor.live.worker', 'this module')}", file=sys.stderr)
        return 2
    live_worker.redirect_output(int(os.environ["RANK"]))
    live_worker.die_with_parent()
    _stack_dumps_on_sigusr1()
    os.environ["TORCHELASTIC_ERROR_FILE"] = str(writer.path("error.json"))
    from torch.distributed.elastic.multiprocessing.errors import record

    record(run)(RankSweep.from_json(args.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
