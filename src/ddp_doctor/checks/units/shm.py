"""/dev/shm size: DataLoader workers and NCCL's shared-memory transport live there."""

from __future__ import annotations

from ddp_doctor.checks import table
from ddp_doctor.checks.facts.host import ShmFacts
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status


def judge(f: ShmFacts) -> Finding:
    """Fails below 256 MiB (size or free space), warns below 1 GiB, and advises 4 GiB per GPU.

    Why: DataLoader workers pass batches through /dev/shm and NCCL's SHM transport keeps its buffers
    there; Docker and podman give a container 64 MiB unless told otherwise. Thresholds and the
    remedy come from checks/knowledge.yaml (`shm`).
    """
    rule = table.shm()
    size_text, free_text = table.size_text(f.size_bytes), table.size_text(f.free_bytes)
    warn_text = table.size_text(rule.warn_below_bytes)
    observed = {"size_bytes": f.size_bytes, "free_bytes": f.free_bytes}
    expected = {"size_bytes": f">= {rule.warn_below_bytes}"}
    if f.size_bytes is None:
        return Finding(
            Status.FAIL,
            f"/dev/shm is not available ({f.error}); expected a tmpfs of >= {warn_text}",
            cause="DataLoader workers and NCCL's shared-memory transport need /dev/shm",
            remedy=rule.remedy(f.gpus),
            observed=observed,
            expected=expected,
        )
    metrics = {"shm_bytes": float(f.size_bytes), "shm_free_bytes": float(f.free_bytes or 0)}
    low = f.free_bytes is not None and f.free_bytes < rule.fail_below_bytes
    if f.size_bytes < rule.fail_below_bytes or low:
        return Finding(
            Status.FAIL,
            f"/dev/shm is {size_text} ({free_text} free); expected >= {warn_text} "
            f"(below {table.size_text(rule.fail_below_bytes)} fails; "
            f"Docker's default is {table.size_text(rule.container_default_bytes)})",
            cause=rule.why,
            remedy=rule.remedy(f.gpus),
            observed=observed,
            expected=expected,
            metrics=metrics,
        )
    if f.size_bytes < rule.warn_below_bytes:
        return Finding(
            Status.WARN,
            f"/dev/shm is {size_text} ({free_text} free); expected >= {warn_text}",
            cause="enough for small batches; larger batches or more DataLoader workers will exhaust it",
            remedy=rule.remedy(f.gpus),
            observed=observed,
            expected=expected,
            metrics=metrics,
        )
    return Finding(Status.PASS, f"/dev/shm is {size_text} ({free_text} free)", observed=observed, metrics=metrics)


CHECK = Check(
    name="shm",
    title="/dev/shm size",
    facts=ShmFacts,
    judge=judge,
    ids={"env": "env.shm", "lint": "lint.<area>.shm_small"},
    order=140,
)
