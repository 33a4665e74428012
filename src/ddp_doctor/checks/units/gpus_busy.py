"""Is another job already on the GPUs this one would use?"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ddp_doctor.checks import table
from ddp_doctor.checks.facts.gpu_devices import BusyFacts, GpuFacts, GpuProcess
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status
from ddp_doctor.words import plural

GiB = 1 << 30


@dataclass(frozen=True)
class BusyGpu:
    """A visible GPU in use by someone else (field order is the report's `observed.busy[]`)."""

    index: int
    uuid: str | None
    name: str | None
    memory_used_bytes: int | float | None
    util_pct: int | float | None
    processes: tuple[GpuProcess, ...]


def others_on_gpus(g: GpuFacts, own_pids: frozenset[int] = frozenset()) -> list[BusyGpu]:
    """Each visible GPU that holds a process not in `own_pids`, or memory / utilisation over the
    thresholds in checks/knowledge.yaml (`gpu_busy`)."""
    rule, busy = table.gpu_busy(), []
    for d in g.visible:
        procs = tuple(p for p in d.processes if p.pid not in own_pids)
        mem, util = d.memory_used_bytes, d.util_pct
        if procs or (mem or 0) >= rule.memory_bytes or (util or 0) >= rule.util_pct:
            busy.append(BusyGpu(d.index, d.uuid, d.name, mem, util, procs))
    return busy


def _gib(n: float | None) -> str:
    return f"{(n or 0) / GiB:.1f} GiB"


def _who(p: GpuProcess) -> str:
    where = f", container {p.container}" if p.container else ""
    named = f" ({p.name}{where})" if p.name else ""
    holds = f" holds {_gib(p.used_bytes)}" if p.used_bytes is not None else ""
    return f"pid {p.pid}{named}{holds}"


def describe(b: BusyGpu) -> str:
    who = ", ".join(_who(p) for p in b.processes[:6]) or "processes NVML does not list (another container or user)"
    util = b.util_pct if b.util_pct is not None else "?"
    return f"GPU {b.index} ({b.name}): {who}; {_gib(b.memory_used_bytes)} in use, utilisation {util}%"


def judge(f: BusyFacts) -> Finding:
    """Warns when another process is on a visible GPU before the chain starts (a process NVML
    lists, or memory / utilisation over the `gpu_busy` thresholds in checks/knowledge.yaml).

    Why: the job would share memory and SMs: slower, uneven steps and a likely out-of-memory error.
    """
    g = f.gpus
    if not g.driver_loaded or not g.visible:
        return skip("no visible GPU to look at")
    busy = others_on_gpus(g)
    observed = {"busy": [{**asdict(b), "processes": [asdict(p) for p in b.processes]} for b in busy], "when": f.when}
    if not busy:
        return Finding(
            Status.PASS, f"no other process on the {plural(len(g.visible), 'visible GPU')}", observed=observed
        )
    return Finding(
        Status.WARN,
        "GPUs already in use: " + "; ".join(describe(b) for b in busy),
        cause="another job shares these GPUs: training gets less memory and fewer SMs, step times are slower "
        "and uneven, and an out-of-memory error is likely",
        remedy="wait for the other job or pick free GPUs (CUDA_VISIBLE_DEVICES=<free ones>); "
        "see `nvidia-smi --query-compute-apps=pid,used_memory --format=csv`",
        observed=observed,
    )


CHECK = Check(
    name="gpus.busy",
    title="GPUs free of other work",
    facts=BusyFacts,
    judge=judge,
    ids={"env": "env.gpus.busy"},
    order=210,
)
