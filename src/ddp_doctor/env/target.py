"""The target environment: which Python interpreter the doctor examines, and why.

The doctor may live in a venv of its own (pipx, `uv tool install`) or in the system Python
beside a training venv; its own interpreter is then not the one the job uses. Every torch /
NCCL / CUDA fact, the live chain's torchrun and ranks, bench and every remedy use the target.

Order (the first that applies):
1. `--python PATH`, then the DDP_DOCTOR_PYTHON environment variable (an error if unusable);
2. the interpreter the `torchrun` on PATH runs (its shebang): what `torchrun train.py` uses;
3. a `python3` / `python` on PATH that has torch (what `python train.py` uses);
4. the doctor's own interpreter, when it has torch or is the environment the user works in (the
   active venv or conda env, or the python3/python on PATH); otherwise no training environment was
   found (source "none"): a doctor installed with pipx or `uv tool` has no torch of its own and is
   never where training runs, so nothing is installed into it and nothing is launched with it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TypedDict, cast

from ddp_doctor import proc
from ddp_doctor.checks.facts.software import NOT_FOUND
from ddp_doctor.env.probes import interp_child
from ddp_doctor.env.probes.interp_child import InterpreterFacts
from ddp_doctor.env.probes.interpreters import same_environment, shebang_python
from ddp_doctor.errors import UsageError

__all__ = [
    "NOT_FOUND",
    "Target",
    "describe",
    "named_interpreters",
    "own",
    "resolve",
    "same_environment",
    "shebang_python",
]

ENV_VAR = "DDP_DOCTOR_PYTHON"
PROBE_TIMEOUT_S = 20.0
"""A cold interpreter on network storage reading package metadata: seconds, not minutes."""
_HAS_TORCH = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('torch') else 1)"


class TargetFacts(TypedDict):
    """facts["target"]: the interpreter examined, why it was chosen, and whether it is the doctor's own."""

    python: str
    source: str
    reason: str
    own: bool


@dataclass(frozen=True)
class Target:
    python: str
    """Absolute path of the interpreter examined (as given; symlinks are not resolved, a venv's
    python is a symlink to the base interpreter and only its path says which environment it is)."""
    source: str
    """flag | env | torchrun | path | doctor | none (no training environment found: see resolve)"""
    reason: str
    """Why this interpreter was chosen, in words, for the report header."""

    @property
    def own(self) -> bool:
        return same_environment(self.python, sys.executable)

    def to_dict(self) -> TargetFacts:
        return TargetFacts(python=self.python, source=self.source, reason=self.reason, own=self.own)


def _usable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _explicit(value: str, where: str) -> Target:
    found = value if os.sep in value else shutil.which(value)
    if not found or not _usable(found):
        raise UsageError(f"{where} {value!r}: no executable Python interpreter there")
    source = "flag" if where == "--python" else "env"
    return Target(os.path.abspath(found), source, f"given with {where}")


def named_interpreters(flag: str | None) -> list[str]:
    """The interpreters --python and $DDP_DOCTOR_PYTHON name, as paths (a bare name found on PATH)."""
    named = [v for v in (flag, os.environ.get(ENV_VAR)) if v]
    return [p for p in (v if os.sep in v else shutil.which(v) for v in named) if p]


def _has_torch(python: str) -> bool:
    done = proc.run([python, "-c", _HAS_TORCH], timeout_s=PROBE_TIMEOUT_S)
    return not done.timed_out and done.returncode == 0


def resolve(flag: str | None = None) -> Target:
    """Choose the interpreter to examine (see the module docstring for the order)."""
    if flag:
        return _explicit(flag, "--python")
    if os.environ.get(ENV_VAR):
        return _explicit(os.environ[ENV_VAR], ENV_VAR)
    torchrun = shutil.which("torchrun")
    if torchrun:
        py = shebang_python(Path(torchrun))
        if py and _usable(py):
            return Target(py, "torchrun", f"the interpreter of the torchrun on PATH, {torchrun}")
    for name in ("python3", "python"):
        py = shutil.which(name)
        if py and _usable(py) and _has_torch(py):
            return Target(os.path.abspath(py), "path", f"the first `{name}` on PATH with torch; no torchrun on PATH")
    why = "no torchrun and no python3/python with torch on PATH"
    if importlib.util.find_spec("torch") is not None or _works_here():
        return Target(sys.executable, "doctor", f"the doctor's own interpreter: {why}")
    return Target(sys.executable, "none", f"no training environment found: {why}, and ddp-doctor's own has none")


def _works_here() -> bool:
    """Is the doctor's own environment the one the user works in (activated, or first on PATH)?"""
    for var in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        active = os.environ.get(var)
        if active and os.path.realpath(active) == os.path.realpath(sys.prefix):
            return True
    for name in ("python3", "python"):
        found = shutil.which(name)
        if found and same_environment(found, sys.executable):
            return True
    return False


def own() -> Target:
    """The doctor's own interpreter, for code that examines files (images) rather than an environment."""
    return Target(sys.executable, "doctor", "the doctor's own interpreter")


def _child_source() -> str:
    return resources.files(__package__ + ".probes").joinpath("interp_child.py").read_text(encoding="utf-8")


def describe(target: Target) -> InterpreterFacts:
    """python facts, torch metadata and NCCL package files of the target, as its own import system sees them."""
    if target.own:
        return interp_child.collect()
    done = proc.run([target.python, "-c", _child_source()], timeout_s=PROBE_TIMEOUT_S)
    for line in reversed(done.stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return cast(InterpreterFacts, data)  # what interp_child printed there: collect()'s JSON
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    why = "did not answer in time" if done.timed_out else f"exited {done.returncode}: {tail}"
    raise UsageError(f"the target interpreter {target.python} could not be examined: {why}")
