"""py-spy's binary is found wherever its wheel put it, not only on PATH or beside python: a doctor whose
dependencies were installed with `pip --target DIR` (as the GPU harness does) has it in DIR/bin."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _pyspy_wheel(tmp: Path) -> Path:
    # The wheel of the py-spy this venv has, from pip's cache or by download; skip only if neither works.
    out = tmp / "wheel"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(out), "py-spy"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    wheels = list(out.glob("py_spy-*.whl"))
    if proc.returncode != 0 or not wheels:
        pytest.skip(f"no py-spy wheel to install (pip download failed: {proc.stderr.strip()[-200:]})")
    return wheels[0]


def _where(pythonpath: list[Path]) -> str:
    code = "from ddp_doctor.jobwatch import stacks; print(stacks.pyspy_path())"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(str(p) for p in pythonpath)}
    # The system python: not this venv, whose bin/ holds a py-spy beside its interpreter.
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_pyspy_installed_with_pip_target_is_found(tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(_pyspy_wheel(tmp_path)),
        ],
        check=True,
        timeout=240,
        capture_output=True,
    )
    assert (target / "bin" / "py-spy").is_file()
    assert _where([target, ROOT / "src"]) == str((target / "bin" / "py-spy").resolve())


def test_without_the_wheel_it_is_not_installed() -> None:
    if shutil.which("py-spy", path="/usr/bin:/bin"):
        pytest.skip("this machine has py-spy on the system PATH")
    assert _where([ROOT / "src"]) == "None"
