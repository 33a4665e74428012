"""The doctor installed the way users install a CLI tool (pipx / `uv tool install`: a venv of its
own without torch) beside a training venv whose bin is on PATH; and the reverse (the doctor inside
the torch venv). Real venvs, the real console script, run as subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

TORCH_VENV_BIN = Path(sys.executable).parent
"""The test suite's own venv has torch: it plays the training venv."""
pytestmark = pytest.mark.skipif(
    not (TORCH_VENV_BIN / "torchrun").is_file(), reason="needs the test venv's torchrun (torch installed in it)"
)


def _clean_path() -> str:
    """PATH without any directory holding a torchrun or a python with torch (the base system dirs)."""
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not Path(d, "torchrun").exists()]
    return os.pathsep.join(d for d in keep if Path(d).resolve() != TORCH_VENV_BIN.resolve())


@pytest.fixture(scope="module")
def doctor_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with ddp-doctor and its dependencies only, installed by pip from this checkout (not editable)."""
    venv = tmp_path_factory.mktemp("pipx") / "ddp-doctor"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # The test venv's pip installs into the new venv (--prefix would mix layouts; --python needs pip >= 22.3).
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", str(ROOT)],
        check=True,
        timeout=600,
        capture_output=True,
    )
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True, timeout=60, check=False
    )
    assert probe.returncode != 0, "the doctor's venv must not have torch"
    return venv


def run_doctor(
    venv: Path, *args: str, path: str, extra: dict[str, str] | None = None, timeout: float = 240
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DDP_DOCTOR_PYTHON")}
    env.update({"PATH": path, "NO_COLOR": "1", **(extra or {})})
    proc = subprocess.run(
        [str(venv / "bin" / "ddp-doctor"), *args, "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd="/",
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, (json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {})


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in report["results"]}


def test_pipx_style_static_examines_the_training_venv_on_path(doctor_venv: Path) -> None:
    proc, report = run_doctor(doctor_venv, "check", "--static", path=f"{TORCH_VENV_BIN}:{_clean_path()}")
    r = by_id(report)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["facts"]["target"]["source"] == "torchrun"
    assert report["facts"]["target"]["python"].startswith(str(TORCH_VENV_BIN))
    assert "the interpreter of the torchrun on PATH" in report["target"]["python"]
    assert r["env.torch.installed"]["status"] == "pass"
    assert report["facts"]["torch"]["location"].startswith(str(TORCH_VENV_BIN.parent))
    assert r["env.torch.import"]["status"] == "pass"
    assert r["env.torchrun"]["status"] == "pass", r["env.torchrun"]
    assert report["facts"]["python"]["prefix"] == str(TORCH_VENV_BIN.parent)
    assert not [x for x in report["results"] if x["status"] == "fail"]


def test_pipx_style_full_check_runs_the_training_venvs_torchrun(doctor_venv: Path) -> None:
    proc, report = run_doctor(
        doctor_venv, "check", "--timeout", "150", path=f"{TORCH_VENV_BIN}:{_clean_path()}", timeout=200
    )
    r = by_id(report)
    assert proc.returncode == 0, proc.stdout[-4000:]
    argv = report["facts"]["live"]["torchrun"]["argv"]
    assert argv[0] == str(TORCH_VENV_BIN / "torchrun")
    assert r["live.launch"]["status"] == "pass"
    assert r["live.ddp.param_sync"]["status"] == "pass"
    # static and live facts describe one environment: no torch-missing or other-torch verdict
    assert r["env.torch.installed"]["status"] == "pass" and r["env.torchrun"]["status"] == "pass"
    assert report["facts"]["torch"]["source"] == "rank 0"


def test_explicit_python_flag_and_env_var_win(doctor_venv: Path) -> None:
    py = str(TORCH_VENV_BIN / "python")
    for args, extra, source in (
        (("--python", py), None, "flag"),
        ((), {"DDP_DOCTOR_PYTHON": py}, "env"),
    ):
        proc, report = run_doctor(doctor_venv, "check", "--static", *args, path=_clean_path(), extra=extra)
        assert report["facts"]["target"]["source"] == source
        assert by_id(report)["env.torch.installed"]["status"] == "pass"
        # torchrun is not on PATH: a warning about PATH, never "another torch" or "torch missing"
        assert by_id(report)["env.torchrun"]["status"] == "warn"
        assert "another torch" not in by_id(report)["env.torchrun"]["summary"]
        assert proc.returncode == 0


def test_no_torch_anywhere_is_no_training_environment_never_the_doctors_own(doctor_venv: Path) -> None:
    proc, report = run_doctor(doctor_venv, "check", "--static", path=_clean_path())
    assert report["facts"]["target"]["source"] == "none"
    assert "no torchrun and no python3/python with torch on PATH" in report["facts"]["target"]["reason"]
    assert report["root_cause"] == "env.python"
    assert by_id(report)["env.python"]["summary"] == "no training environment found: activate it or pass --python"
    assert by_id(report)["env.torch.installed"]["status"] == "skip"
    assert not [r["id"] for r in report["results"] if str(doctor_venv) in (r.get("remedy") or "")]
    assert proc.returncode == 1


def test_bad_python_is_a_usage_error(doctor_venv: Path) -> None:
    proc, _ = run_doctor(doctor_venv, "check", "--static", "--python", "/nonexistent/python", path=_clean_path())
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "/nonexistent/python" in proc.stderr


def test_reverse_doctor_inside_the_torch_venv() -> None:
    """The doctor installed in the training venv itself, that venv's bin not on PATH (unactivated)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DDP_DOCTOR_PYTHON",)}
    env.update(PATH=_clean_path(), NO_COLOR="1")
    proc = subprocess.run(
        [str(TORCH_VENV_BIN / "ddp-doctor"), "check", "--static", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        cwd="/",
        check=False,
    )
    report = json.loads(proc.stdout)
    assert report["facts"]["target"]["source"] == "doctor"
    assert report["facts"]["target"]["own"] is True
    r = by_id(report)
    assert r["env.torch.installed"]["status"] == "pass" and r["env.torch.import"]["status"] == "pass"
    assert proc.returncode == 0, proc.stdout[-3000:]
