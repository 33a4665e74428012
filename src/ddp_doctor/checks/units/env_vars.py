"""Do RANK / WORLD_SIZE / MASTER_* / *_SOCKET_IFNAME / CUDA_* in the environment make sense here?

The verdicts are checks/variables.py's, one per variable from knowledge/variables.yaml; on a host this
unit shows those of the launch, interface and CUDA variables, env.dist_vars those of NCCL,
torch.distributed and gloo, so no variable is judged twice; an image and a launch config have this
unit alone, for every variable.
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
    *_SOCKET_IFNAME is not matched there. A launch config's variables (container env, compose
    environment, Dockerfile ENV, `export`, `srun --export`, `mpirun -x`) are too: lint reports each
    verdict on the variable's line as `variable_invalid`, `variable_unknown`, `variable_not_read`,
    `variable_renamed` or `variable_costly`, with NCCL running in a GPU job and not in a CPU one.
    """
    if f.env is None:
        return skip(f.unknown_why or "the environment is not known here")
    env = dict(f.env)
    found = variables.judge(env, f.context)
    # On a host env.dist_vars shows NCCL's and torch's; an image and a config have one unit for all of them.
    shown = [v for v in found if f.every_variable or not v.values_check]
    observed: dict[str, object] = {"env": env, "verdicts": [v.to_dict() for v in shown if v.text]}
    where_words = " baked into the image" if f.baked else ""
    said = [v for v in shown if v.text]
    if not said:
        own = [k for k in env if f.every_variable or not k.startswith(variables.PREFIXES)]
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
    ids={"env": "env.env_vars", "image": "image.env", "lint": "lint.<area>.variable_<verdict>"},
    order=180,
)
