"""Are the NCCL_* / TORCH_NCCL_* / TORCH_DISTRIBUTED_* / GLOO_* values ones NCCL and torch accept?"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddp_doctor.checks import distvars
from ddp_doctor.checks.facts import typed
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status
from ddp_doctor.words import plural


@dataclass(frozen=True)
class DistVarsFacts:
    env: Mapping[str, str]
    host: Mapping[str, Any]
    """The facts distvars.validate weighs a value against (the NCCL version, its network plugins,
    NVLink, InfiniBand); distvars reads them itself, as `live` does for a failed run."""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> DistVarsFacts:
        env = typed(facts.get("env"), Mapping, "env") or {}
        return cls({str(k): str(v) for k, v in env.items()}, facts)


def judge(f: DistVarsFacts) -> Finding:
    """Fails or warns on each variable whose value knowledge/dist_vars.yaml says NCCL or torch
    rejects (naming the accepted values), on names close to a real one ("did you mean"), on
    variables this NCCL does not read (added later, removed) and on valid values that cost time on
    this machine. Each finding carries the source it was read from.
    """
    found = distvars.validate(dict(f.env), dict(f.host))
    shown = [k for k in f.env if k.startswith(distvars.PREFIXES)]
    if not found:
        return Finding(
            Status.PASS,
            f"{plural(len(shown), 'setting')} valid" + (f": {', '.join(shown[:8])}" if shown else " (none set)"),
            observed={"checked": shown},
        )
    failing = any(x.status == "fail" for x in found)
    # NCCL reads its variables only when a CUDA build of torch runs NCCL on a GPU: on a CPU-only host
    # (gloo) a bad NCCL_* value breaks nothing yet, so it is a WARN that says when it would fail.
    nccl_failing = failing and all(x.variable.startswith("NCCL_") for x in found if x.status == "fail")
    dormant = nccl_failing and not nccl_in_play(f.host)
    return Finding(
        Status.WARN if dormant or not failing else Status.FAIL,
        "; ".join(x.text for x in found)
        + (
            "; NCCL is not used on this host (no CUDA build of torch with a GPU), so this fails only once the job runs "
            "on GPUs"
            if dormant
            else ""
        ),
        cause="NCCL and torch read these variables at init; an invalid one stops the process group or is "
        "silently ignored, a costly one slows every step",
        remedy="\n".join(dict.fromkeys(x.remedy for x in found)),
        observed={"findings": [{"variable": x.variable, "status": x.status, "source": x.source} for x in found]},
    )


def nccl_in_play(host: Mapping[str, Any]) -> bool:
    """A CUDA build of torch and at least one GPU seen (by NVML or torch): NCCL will read its variables."""
    torch = typed(host.get("torch"), Mapping, "torch") or {}
    gpus = typed(host.get("gpus"), Mapping, "gpus") or {}
    cuda_build = str(torch.get("flavour") or "") not in ("", "cpu")
    return cuda_build and any(
        int(n or 0) > 0 for n in (gpus.get("count"), gpus.get("physical_count"), torch.get("device_count"))
    )


CHECK = Check(
    name="dist_vars",
    title="NCCL / torch.distributed variables (values)",
    facts=DistVarsFacts,
    judge=judge,
    ids={"env": "env.dist_vars"},
)
