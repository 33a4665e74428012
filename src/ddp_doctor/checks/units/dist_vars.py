"""Are the NCCL_* / TORCH_NCCL_* / TORCH_DISTRIBUTED_* / GLOO_* values ones NCCL and torch accept?

The verdicts are checks/variables.py's, one per variable from knowledge/variables.yaml; this unit
shows those of NCCL, torch.distributed and gloo, env.env_vars the launch, interface and CUDA ones.
"""

from __future__ import annotations

from ddp_doctor.checks import variables
from ddp_doctor.checks.facts.host import EnvVarsFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status
from ddp_doctor.words import plural

_NONE_SET = "no NCCL_*, TORCH_NCCL_*, TORCH_DISTRIBUTED_* or GLOO_* variable is set (the defaults apply)"


def judge(f: EnvVarsFacts) -> Finding:
    """Fails or warns on each variable whose value knowledge/variables.yaml says NCCL or torch
    rejects (naming the accepted values; an empty value as its reader reads it), on settings no
    library reads (what people meant and the real knob), on names close to a real one ("did you
    mean", only when the value fits it), on variables this NCCL does not read (added later,
    removed) and on valid values that cost time on this machine. An invalid NCCL value where NCCL
    does not run (CPU torch, or no GPU) is a WARN that says when it would fail.
    """
    if f.env is None:
        return skip(f.unknown_why or "the environment is not known here")
    found = [v for v in variables.judge(f.env, f.context) if v.values_check]
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
        observed={"verdicts": [v.to_dict() for v in said]},
    )


CHECK = Check(
    name="dist_vars",
    title="NCCL / torch.distributed variables (values)",
    facts=EnvVarsFacts,
    judge=judge,
    ids={"env": "env.dist_vars"},
    order=220,
)
