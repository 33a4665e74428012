"""Do RANK / WORLD_SIZE / MASTER_* / *_SOCKET_IFNAME / CUDA_* in the environment make sense here?

The verdicts are checks/variables.py's, one per variable from knowledge/variables.yaml; this unit
shows those of the launch, interface and CUDA variables, env.dist_vars those of NCCL, torch.distributed
and gloo, so no variable is judged twice.
"""

from __future__ import annotations

from ddp_doctor.checks import variables
from ddp_doctor.checks.facts.host import EnvVarsFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status

CAUSE = "these variables change how torchrun, torch.distributed or NCCL behave"
BAKED_CAUSE = "variables baked into an image apply to every job on every cluster, and " + CAUSE
BAKED_REMEDY = "remove them from the Dockerfile ENV; set them per job if needed"
_STATUS = {"fail": Status.FAIL, "warn": Status.WARN, "pass": Status.PASS}


def judge(f: EnvVarsFacts) -> Finding:
    """Fails on a *_SOCKET_IFNAME that matches no interface (the remedy names an UP one, the one
    carrying the route first) and on CUDA_VISIBLE_DEVICES hiding every GPU where NCCL should run;
    warns on RANK / WORLD_SIZE / MASTER_* set by hand (malformed, out of range, half set, or set
    outside torchrun: torchrun replaces them, a plain `python train.py` reads them) and on settings that
    change behaviour (CUDA_LAUNCH_BLOCKING=1).

    An image's config Env is judged by the same verdicts (`image.env`), as what every container
    starts with, NCCL's and torch's variables included; its interfaces are the node's, so
    *_SOCKET_IFNAME is not matched there.
    """
    if f.env is None:
        return skip(f.unknown_why or "the environment is not known here")
    env = dict(f.env)
    where = variables.VariableContext(nccl_runs=f.nccl_runs, gpus_seen=f.gpus_seen, network=f.network)
    found = variables.judge(env, where)
    # On a host env.dist_vars shows NCCL's and torch's; an image has one unit for all of them.
    shown = [v for v in found if f.baked or not v.values_check]
    observed = {"env": env}
    where_words = " baked into the image" if f.baked else ""
    said = [v for v in shown if v.text]
    if not said:
        own = [k for k in env if f.baked or not k.startswith(variables.PREFIXES)]
        names = ", ".join(f"{k}={env[k]}" for k in own if k.startswith(("NCCL_", "TORCH_NCCL_", "MASTER_")))
        return Finding(
            Status.PASS,
            f"no problematic settings{where_words}"
            + (f" ({names})" if names else " (no RANK/WORLD_SIZE/MASTER_* set)"),
            observed=observed,
        )
    worst = min((_STATUS[v.status] for v in said), key=lambda s: (Status.FAIL, Status.WARN, Status.PASS).index(s))
    remedies = variables.remedies(shown)
    if f.baked and worst is not Status.PASS:
        remedies.insert(0, BAKED_REMEDY)
    text = variables.summary(shown)
    if any(v.dormant and v.status != "pass" for v in shown):
        text += "; " + variables.DORMANT
    return Finding(
        worst,
        ("the image sets " if f.baked else "") + text,
        cause=(BAKED_CAUSE if f.baked else CAUSE) if worst is not Status.PASS else None,
        remedy="\n".join(remedies) or None,
        observed=observed,
    )


CHECK = Check(
    name="env_vars",
    title="distributed environment variables",
    facts=EnvVarsFacts,
    judge=judge,
    ids={"env": "env.env_vars", "image": "image.env"},
    order=180,
)
