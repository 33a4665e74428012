"""Are the NCCL_* / TORCH_NCCL_* / TORCH_DISTRIBUTED_* / GLOO_* values ones NCCL and torch accept?

The verdicts are checks/variables.py's, one per variable from knowledge/variables.yaml; this unit
shows those of NCCL, torch.distributed and gloo, env.env_vars the launch, interface and CUDA ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddp_doctor.checks import variables
from ddp_doctor.checks.facts.fields import typed
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status
from ddp_doctor.words import plural

_NONE_SET = "no NCCL_*, TORCH_NCCL_*, TORCH_DISTRIBUTED_* or GLOO_* variable is set (the defaults apply)"


@dataclass(frozen=True)
class DistVarsFacts:
    env: Mapping[str, str]
    host: Mapping[str, Any]
    """The facts a value is weighed against (the NCCL version, its network plugins, NVLink,
    InfiniBand, whether NCCL runs here), read by variables.VariableContext.of_host."""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> DistVarsFacts:
        env = typed(facts.get("env"), Mapping, "env") or {}
        return cls({str(k): str(v) for k, v in env.items()}, facts)


def judge(f: DistVarsFacts) -> Finding:
    """Fails or warns on each variable whose value knowledge/variables.yaml says NCCL or torch
    rejects (naming the accepted values; an empty value as its reader reads it), on settings no
    library reads (what people meant and the real knob), on names close to a real one ("did you
    mean", only when the value fits it), on variables this NCCL does not read (added later,
    removed) and on valid values that cost time on this machine. An invalid NCCL value where NCCL
    does not run (CPU torch, or no GPU) is a WARN that says when it would fail.
    """
    found = [v for v in variables.judge(dict(f.env), variables.VariableContext.of_host(f.host)) if v.values_check]
    ifnames = set(variables.table().get("ifname_vars") or [])
    shown = [k for k in f.env if k.startswith(variables.PREFIXES) and k not in ifnames]
    said = [v for v in found if v.text and v.status != "pass"]
    notes = [v for v in found if v.text and v.status == "pass"]
    if not said:
        extra = f"; {variables.summary(notes)}" if notes else ""
        return Finding(
            Status.PASS,
            (f"{plural(len(shown), 'setting')} valid: {', '.join(shown[:8])}" if shown else _NONE_SET) + extra,
            observed={"checked": shown},
        )
    failing = any(v.status == "fail" for v in said)
    text = variables.summary(said)
    if any(v.dormant for v in said):
        text += "; " + variables.DORMANT
    return Finding(
        Status.FAIL if failing else Status.WARN,
        text,
        cause="NCCL and torch read these variables at init; an invalid one stops the process group or is "
        "silently ignored, a costly one slows every step, and one no library reads changes nothing",
        remedy="\n".join(variables.remedies(said)),
        observed={"findings": [{"variable": v.variable, "status": v.status, "source": v.source} for v in said]},
    )


CHECK = Check(
    name="dist_vars",
    title="NCCL / torch.distributed variables (values)",
    facts=DistVarsFacts,
    judge=judge,
    ids={"env": "env.dist_vars"},
    order=220,
)
