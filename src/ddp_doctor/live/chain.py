"""`ddp-doctor check` without --static: static facts in a thread while the real torchrun job runs.

One launch runs every phase (each launch costs a torch import per rank). The static facts
are gathered without importing torch (`probe_torch=False`); the torch facts come from rank
0 instead and are merged before the static checks are evaluated.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ddp_doctor.checkconfig import CheckConfig
from ddp_doctor.diagnose import diagnose
from ddp_doctor.env import facts as env_facts
from ddp_doctor.env.probes import gpu
from ddp_doctor.env.target import Target
from ddp_doctor.health import gpu as health_gpu
from ddp_doctor.live import capacity, hostcheck
from ddp_doctor.live import launch as launcher
from ddp_doctor.live.merge import Merged, Plan, first_failure, merge
from ddp_doctor.live.multinode import node
from ddp_doctor.live.nodestage import OneNode, Stage
from ddp_doctor.live.phases.balance import BASELINE_ENV
from ddp_doctor.live.rankconfig import RankConfig
from ddp_doctor.live.reconcile import blame_variables, reconcile
from ddp_doctor.live.worker import PHASES
from ddp_doctor.proc import Background
from ddp_doctor.report import Evidence, Report, Result, Status
from ddp_doctor.rundir.records import Heartbeat
from ddp_doctor.words import count, plural

NVML_TIMEOUT_S = 5.0


def _gather_facts(target: Target | None, rdzv_endpoint: str | None = None) -> dict[str, Any]:

    # Interface advice is ranked by the route to the rendezvous host when there is one (the ranks'
    # traffic goes there), else to $MASTER_ADDR, else the default route.
    host = rdzv_endpoint.rpartition(":")[0].strip("[]") if rdzv_endpoint and ":" in rdzv_endpoint else rdzv_endpoint
    return env_facts.gather(probe_torch=False, target=target, route_to=host or None)


def gpu_snapshot() -> gpu.GpuProbe:
    """NVML now: visible GPUs (CUDA_VISIBLE_DEVICES applied), memory, utilisation and compute
    processes per GPU; never initialises CUDA. Taken before torchrun starts, it is the baseline
    against which the run's own use is measured."""
    value, _ = Background("the NVML probe", gpu.probe).result(NVML_TIMEOUT_S)
    return value if value is not None else gpu.GpuProbe()


def visible_gpus() -> int:
    """GPUs this process may use, from NVML and CUDA_VISIBLE_DEVICES; never initialises CUDA."""
    return len(gpu_snapshot().get("visible") or [])


def _baseline_env(snapshot: gpu.GpuProbe) -> str:
    per_gpu = {
        str(d.get("uuid")): {
            "index": d.get("index"),
            "memory_used_bytes": d.get("memory_used_bytes"),
            "util_pct": d.get("util_pct"),
            "processes": d.get("processes"),
        }
        for d in snapshot.get("visible") or []
        if d.get("uuid")
    }
    return json.dumps(per_gpu, separators=(",", ":"))


def _rank_env(snapshot: gpu.GpuProbe | None, backend: str) -> dict[str, str]:
    """What the chain adds to the ranks' environment: the GPUs' use before the run, NCCL's log."""
    env: dict[str, str] = {}
    if snapshot and snapshot.get("visible"):
        env[BASELINE_ENV] = _baseline_env(snapshot)
    if backend == "nccl":
        env.update(
            {
                "NCCL_DEBUG": os.environ.get("NCCL_DEBUG", "INFO"),
                "NCCL_DEBUG_FILE": "{run_dir}/nccl.%p.log",
                "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
            }
        )
    return env


def plan_for(
    config: CheckConfig, target: Target | None = None, snapshot: gpu.GpuProbe | None = None
) -> tuple[Plan, launcher.TorchrunSpec, RankConfig]:
    wants_gpus = config.backend in (None, "nccl") and (config.backend is None or config.nproc is None)
    if snapshot is None and wants_gpus:
        snapshot = gpu_snapshot()
    gpus = len((snapshot or gpu.GpuProbe()).get("visible") or []) if wants_gpus else 0
    backend = config.backend or ("nccl" if gpus else "gloo")
    nproc = config.nproc or (gpus if backend == "nccl" and gpus else 2)
    # The default rank count is the machine's own (2 gloo ranks fit one core too); memory bounds every count.
    capacity.refuse_beyond(
        nproc,
        backend,
        len((snapshot or gpu_snapshot()).get("visible") or []) if backend == "nccl" else 0,
        config.oversubscribe or config.nproc is None,
        capacity.for_check(config.dataloader_workers, config.batch_mb),
    )
    nnodes = str(config.nnodes or "1")
    world = nproc * int(nnodes) if nnodes.isdigit() else None
    phases = list(PHASES) + (["gpu_health"] if config.gpu_health else [])
    ranks = RankConfig.for_check(config, backend=backend, phases=tuple(phases), expected_world_size=world)
    env = _rank_env(snapshot, backend)
    spec = launcher.TorchrunSpec(
        entry_module="ddp_doctor.live.worker",
        entry_args=ranks.argv(),
        nproc=nproc,
        backend=backend,
        timeout_s=config.timeout,
        env=env,
        nnodes=nnodes,
        node_rank=config.node_rank,
        rdzv_endpoint=config.rdzv_endpoint,
        rdzv_id=config.rdzv_id,
        master_port=config.master_port,
        join_timeout_s=config.join_timeout,
        keep_run_dir=bool(config.keep_run_dir),
        python=target.python if target is not None else None,
    )
    plan = Plan(
        backend=backend,
        nproc=nproc,
        world_size=world,
        nnodes=nnodes,
        phases=phases,
        timeout_s=config.timeout,
        node=socket.gethostname(),
        ib_present=Path("/sys/class/infiniband").is_dir() and any(Path("/sys/class/infiniband").iterdir()),
    )
    return plan, spec, ranks


def _launched(spec: launcher.TorchrunSpec, ranks: RankConfig) -> launcher.TorchrunSpec:
    # Wall-clock, because ranks on other nodes share it (the parent itself uses a monotonic one).
    return replace(spec, entry_args=ranks.launched(time.time()).argv())


def _launch_result(outcome: launcher.RunOutcome, plan: Plan) -> Result:
    argv = " ".join(outcome.argv)
    if outcome.preflight_error:
        port = "port" in outcome.preflight_error.lower()
        return Result(
            "live.launch",
            "torchrun starts the ranks",
            Status.FAIL,
            outcome.preflight_error,
            cause="the rendezvous port is taken by another process" if port else "torchrun could not start",
            remedy=(
                "pick a free port with --master-port PORT, or leave --master-port out to get a free one"
                if port
                else "install torch in this environment (`pip install torch`) so torchrun exists"
            ),
            observed={"argv": outcome.argv},
        )
    if not outcome.heartbeats and not outcome.ranks and not outcome.timed_out and outcome.returncode:
        return _launcher_died(outcome)
    source = {
        "path": "torchrun on PATH",
        "interpreter": "torchrun beside this Python",
        "given": "the given torchrun",
        "module": "python -m torch.distributed.run",
    }[outcome.launcher_source]
    if outcome.launcher_source == "module":
        return Result(
            "live.launch",
            "torchrun starts the ranks",
            Status.WARN,
            f"no torchrun on PATH; launched {plural(plan.nproc, 'rank')} with {source}",
            cause="torchrun is not on PATH: the user's `torchrun train.py` would fail with 'command not found'",
            remedy="add the environment's bin directory to PATH, or reinstall torch (it installs torchrun)",
            observed={"argv": outcome.argv},
        )
    return Result(
        "live.launch",
        "torchrun starts the ranks",
        Status.PASS,
        f"{source} launched {plural(plan.nproc, 'rank')} x {count(plan.nnodes, 'node')}, {plan.backend}; "
        f"finished in {outcome.duration_s:.1f} s",
        observed={"argv": argv},
    )


def _launcher_died(outcome: launcher.RunOutcome) -> Result:
    """torchrun (or the interpreter) exited before any rank ran a line: say why, from its own output."""
    log = outcome.logs.get("torchrun.log", [])
    r = Result(
        "live.launch",
        "torchrun starts the ranks",
        Status.FAIL,
        f"{outcome.argv[0]} exited {outcome.returncode} before any rank started"
        + (f": {log[-1].strip()[:300]}" if log else ""),
        cause="the launcher itself failed (torch missing or broken in its interpreter, a bad flag, "
        "or the rendezvous could not be set up)",
        remedy="run the torchrun command in `observed.argv` by hand and read its first error",
        observed={"argv": outcome.argv, "returncode": outcome.returncode},
        evidence=[Evidence("torchrun.log", ln[:500], i) for i, ln in enumerate(log, 1)][-10:],
    )
    found = diagnose({"torchrun.log": log}, {"torchrun": outcome.returncode or 0})
    top = first_failure(found)
    if top:
        r.cause, r.remedy = top.cause or r.cause, top.remedy or r.remedy
    if found:
        r.observed["diagnosis"] = [d.id for d in found]
    return r


def _timeout_result(outcome: launcher.RunOutcome, plan: Plan) -> Result:
    where = (
        ", ".join(
            f"rank {r}: {b.phase}" + (f" ({b.step})" if b.step else "") for r, b in sorted(outcome.heartbeats.items())
        )
        or "no rank had started"
    )
    r = Result(
        "live.timeout",
        "the chain finishes within --timeout",
        Status.FAIL,
        f"the run did not finish within {plan.timeout_s:g} s; where each rank was: {where}",
        cause="a rank was stuck (see the stacks) or the machine is too slow for this timeout",
        remedy="read the stacks below; if the ranks were progressing, raise --timeout",
        observed={"heartbeats": {r: b.to_dict() for r, b in outcome.heartbeats.items()}},
    )
    for rank, stack in sorted(outcome.stacks.items()):
        r.evidence.append(Evidence(f"rank-{rank}.stack", stack[-3000:]))
    return r


def run_check(
    config: CheckConfig,
    report: Report,
    target: Target | None = None,
    on_poll: Callable[[dict[int, Heartbeat]], None] | None = None,
) -> Report:
    """The live check of this node: plan, launch, one host subject judged once, one report."""
    snapshot = gpu_snapshot()  # before anything of ours runs on the GPUs: what others hold there
    plan, spec, ranks = plan_for(config, target, snapshot)
    stage = _stage(config, plan.backend)
    blocked = stage.blocked()
    if blocked is not None:
        return hostcheck.assemble(report, blocked.facts, blocked.results)
    # Parallel to torchrun's start: the verdict should take as long as the bare job.
    facts_job = Background("the static gather", lambda: _gather_facts(target, config.rdzv_endpoint))
    with stage.watch():
        outcome = launcher.launch(_launched(stage.apply(spec), ranks), on_poll=on_poll)
    stage.adopt(outcome, plan)
    gathered, gather_problem = facts_job.result(max(5.0, config.timeout))
    merged = merge(outcome, plan)
    facts = hostcheck.host_facts(
        gathered if isinstance(gathered, dict) else None,
        config,
        ranks_torch=merged.torch_facts,
        live={
            **merged.live_facts,
            "torchrun": {"argv": outcome.argv, "source": outcome.launcher_source},
            "duration_s": outcome.duration_s,
            "timed_out": outcome.timed_out,
            "cleanup": outcome.cleanup,
            "run_dir": outcome.run_dir,
        },
        gpu_baseline=snapshot if snapshot.get("driver_loaded") else None,
    )
    if gather_problem is None and not isinstance(gathered, dict):
        gather_problem = "no facts came back"
    static = hostcheck.judge(facts, gather_problem)
    interfaces = [str(i.get("name")) for i in ((facts.get("network") or {}).get("interfaces") or [])]
    results, root_cause = _judged(static, outcome, plan, merged, config, interfaces)
    concluded = stage.conclude(results, root_cause, outcome)
    if concluded.lead is not None:
        results, root_cause = [concluded.lead, *results], concluded.lead.id
    return hostcheck.assemble(report, {**facts, **concluded.facts}, [*results, *concluded.results], root_cause)


def _stage(config: CheckConfig, backend: str) -> Stage:
    return node.prepare(config, backend) if config.multinode else OneNode()


def _judged(
    static: list[Result],
    outcome: launcher.RunOutcome,
    plan: Plan,
    merged: Merged,
    config: CheckConfig,
    interfaces: list[str],
) -> tuple[list[Result], str | None]:
    """This node's results in report order, and the root cause among them."""
    launched = _launch_result(outcome, plan)
    if outcome.preflight_error or launched.status is Status.FAIL:
        return [*static, launched], "live.launch"
    results = [*static, launched]
    if outcome.timed_out:
        results.append(_timeout_result(outcome, plan))
    results.extend(merged.results)
    if config.gpu_health:
        per_gpu = [res.body["gpu_health"] for _, res in sorted(outcome.ranks.items()) if res.body.get("gpu_health")]
        results.extend(health_gpu.evaluate(per_gpu, prefix="live.gpu_health") if per_gpu else [])
    if outcome.run_dir:
        results.append(
            Result(
                "live.run_dir",
                "run directory kept",
                Status.PASS,
                f"per-rank logs kept in {outcome.run_dir}",
                observed={"path": outcome.run_dir},
            )
        )
    failed = any(r.status in (Status.FAIL, Status.ERROR) for r in results)
    if merged.root is None and outcome.returncode not in (0, None) and not failed:
        results.append(
            Result(
                "live.exit",
                "torchrun exits 0",
                Status.FAIL,
                f"torchrun exited {outcome.returncode} although every rank reported success",
                evidence=[Evidence("torchrun.log", ln) for ln in outcome.logs.get("torchrun.log", [])[-10:]],
            )
        )
    results = reconcile(results)
    results = blame_variables(results, {str(k): str(v) for k, v in os.environ.items()}, interfaces)
    return results, merged.root.id if merged.root is not None else None
