"""Does the interpreter that runs the job fit the torch release installed in it?"""

from __future__ import annotations

from ddp_doctor import knowledge
from ddp_doctor.checks.facts.software import NOT_FOUND, PythonFacts
from ddp_doctor.checks.install import py_fits
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status

REMEDY = (
    "activate the environment your jobs run in (source VENV/bin/activate, conda activate NAME) and run "
    "ddp-doctor again, or pass --python /path/to/its/python (or set DDP_DOCTOR_PYTHON); with none yet, make "
    "one of its own: python3 -m venv ~/train && ~/train/bin/python -m pip install torch, then --python ~/train/bin/python"
)


def judge(f: PythonFacts) -> Finding:
    """Names the interpreter and its environment (venv, conda, system); warns when the installed
    torch release has no official wheels for this Python version.

    The supported Python range of each release comes from knowledge/torch_releases.yaml.
    Fails when no training environment was found: no torchrun and no python3/python with torch on
    PATH, and ddp-doctor's own environment (pipx, `uv tool`) is not one; the remedy points at the
    user's environment, never at installing torch into ddp-doctor's.
    """
    if not f.found:
        return Finding(
            Status.FAIL,
            NOT_FOUND,
            cause="no torchrun and no python3/python with torch on PATH, and ddp-doctor's own environment "
            f"({f.executable}) has no torch and is not where jobs run",
            remedy=REMEDY,
            observed={"python": None},
            expected={"python": "the interpreter of the training environment"},
        )
    summary = f"Python {f.version} ({f.implementation}) at {f.executable}, {f.environment}"
    observed = {"python": f.version}
    rel = knowledge.release(f.torch_version) if f.torch_version else None
    if rel and not py_fits(rel, f.version or ""):
        lo, hi = rel["python"]
        return Finding(
            Status.WARN,
            f"{summary}; torch {rel['version']} supports Python {lo} to {hi}",
            cause=f"official torch {rel['version']} wheels are built for Python {lo}..{hi} only",
            remedy=f"use a Python {lo}..{hi} environment for torch {rel['version']}",
            observed=observed,
            expected={"python": f"{lo}..{hi}"},
        )
    return Finding(Status.PASS, summary, observed=observed)


CHECK = Check(
    name="python", title="Python interpreter", facts=PythonFacts, judge=judge, ids={"env": "env.python"}, order=10
)
