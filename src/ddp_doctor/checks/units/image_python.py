"""An image's Python interpreters: is there one that works, in the environment that has torch?"""

from __future__ import annotations

from ddp_doctor.checks.facts.image_only import InterpretersFacts
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status
from ddp_doctor.words import plural


def _torch_envs(f: InterpretersFacts) -> str:
    """Every environment with torch, and which one the audit judged and why."""
    envs = f.torch_environments
    if not envs:
        return ""
    listed = ", ".join(f"{e['prefix']} (torch {e['version'] or '?'})" for e in envs[:6])
    return (
        f"; {plural(len(envs), 'environment')} with torch: {listed}; "
        f"judged {envs[0]['prefix']} because {f.chosen_because}"
    )


def _dangling(f: InterpretersFacts) -> str:
    return ", ".join(f"{p} -> {to or '?'}" for p, to in list(f.broken.items())[:4])


def judge(f: InterpretersFacts) -> Finding:
    """Fails when no bin/ directory of the image holds a working python, or when torch's environment
    has none of its own; otherwise names the interpreters and every environment with torch, and which
    one the other checks judged.

    Why: torchrun and the training script need Python inside the image. A venv made in one build
    stage and copied into another keeps links to an interpreter that stayed behind.
    """
    broken = dict(f.broken)
    if not f.interpreters:
        return Finding(
            Status.FAIL,
            f"no working python interpreter in the image: {_dangling(f)}, which the image does not contain"
            if broken
            else "no python interpreter in any bin/ directory of the image",
            cause="torchrun and the training script need Python inside the image"
            + (
                "; these are links to an interpreter that was not copied into it (a venv made in a "
                "build stage whose Python stayed behind)"
                if broken
                else ""
            ),
            remedy="build FROM an image with Python (e.g. python:3.12-slim or pytorch/pytorch)"
            + (
                "; in a multi-stage build, copy the venv into a stage with the same Python at the same path"
                if broken
                else ""
            ),
            observed={"interpreters": [], "broken_interpreters": broken},
            expected={"interpreters": ">= 1"},
        )
    env = f.torch_prefix
    if env and f.executable is None and any(p.startswith(f"{env.rstrip('/')}/bin/") for p in broken):
        return Finding(
            Status.FAIL,
            f"torch's environment {env} has no working interpreter: {_dangling(f)}, which the image does not contain",
            cause="the environment's python is a link to an interpreter that was not copied into the image",
            remedy="in a multi-stage build, copy the venv into a stage with the same Python at the same path",
            observed={"interpreters": list(f.interpreters), "broken_interpreters": broken},
            expected={"interpreters": f"a working python in {env}/bin"},
        )
    shown = ", ".join(f.interpreters[:6])
    return Finding(
        Status.PASS,
        f"{plural(len(f.interpreters), 'interpreter')}: {shown}; torch's is {f.executable or 'unknown'}"
        + _torch_envs(f),
        observed={
            "interpreters": list(f.interpreters),
            "site_packages": list(f.site_packages),
            "torch_environments": [dict(e) for e in f.torch_environments],
        },
    )


CHECK = Check(
    name="interpreters",
    title="Python interpreter",
    facts=InterpretersFacts,
    judge=judge,
    ids={"image": "image.python"},
    order=12,
)
