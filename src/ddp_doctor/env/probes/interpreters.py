"""Interpreter paths: which Python a console script runs, and whether two paths are one environment.

Below both env.target (which chooses the interpreter to examine) and env.probes.system (which
reads the torchrun on PATH): the two need the same answers, and neither may import the other.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def _prefix_of(python: str) -> Path:
    """The environment directory of an interpreter path: .../venv/bin/python -> .../venv."""
    return Path(os.path.abspath(python)).parent.parent


def same_environment(a: str, b: str) -> bool:
    """Two interpreter paths run the same environment (same venv, or the same real binary outside venvs)."""
    pa, pb = Path(os.path.abspath(a)), Path(os.path.abspath(b))
    if pa == pb or _prefix_of(a) == _prefix_of(b):
        return True
    venv_a = (_prefix_of(a) / "pyvenv.cfg").is_file()
    venv_b = (_prefix_of(b) / "pyvenv.cfg").is_file()
    if venv_a or venv_b:
        return False  # a venv's python is a symlink to the base one, yet another environment
    try:
        return pa.resolve() == pb.resolve()
    except OSError:
        return False


def shebang_python(script: Path) -> str | None:
    """The interpreter a console script runs: its #! line, or the `exec' PY` trampoline pip
    writes when the path is too long for #!."""
    try:
        with script.open("rb") as f:
            head = f.read(1024).decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    if not head or not head[0].startswith("#!"):
        return None
    words = head[0][2:].strip().split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:
        return shutil.which(words[-1]) or words[-1]
    if Path(words[0]).name in ("sh", "bash"):
        for line in head[1:4]:
            if "exec'" in line:
                parts = line.split("exec'", 1)[1].strip().split()
                return parts[0].strip("'\"") if parts else None
        return None
    return words[0]
