"""ddp-doctor installed on its own (pipx, `uv tool`) with no torch anywhere on PATH: the root cause is
that no training environment was found, nothing is launched with ddp-doctor's own interpreter, and
no remedy installs torch into ddp-doctor's environment."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool_install(tmp: Path) -> Path:
    """A venv of ddp-doctor's own, as pipx makes one: every dependency but torch; only the console
    script is put on PATH (pipx's ~/.local/bin), never the venv's python."""
    venv = tmp / "pipx" / "venvs" / "ddp-doctor"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    deps = tmp / "deps"
    deps.mkdir()
    for entry in Path(site.getsitepackages()[0]).iterdir():
        if entry.name.split("-")[0].split(".")[0] not in ("torch", "ddp_doctor", "__editable__"):
            (deps / entry.name).symlink_to(entry)
    purelib = next((venv / "lib").glob("python3*/site-packages"))
    (purelib / "deps.pth").write_text(f"{ROOT / 'src'}\n{deps}\n")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    script = bin_dir / "ddp-doctor"
    script.write_text(f"#!{venv}/bin/python\nimport sys\nfrom ddp_doctor.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return bin_dir


def _has_torch(python: str) -> bool:
    done = subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=120, check=False)
    return done.returncode == 0


def test_pipx_doctor_without_torch_anywhere(tmp_path: Path) -> None:
    path = f"{_tool_install(tmp_path)}:/usr/bin:/bin"
    for name in ("python3", "python", "torchrun"):
        found = [f"{d}/{name}" for d in ("/usr/bin", "/bin") if os.access(f"{d}/{name}", os.X_OK)]
        if name == "torchrun" and found or any(_has_torch(p) for p in found if name != "torchrun"):
            pytest.skip(f"{found[0]} on this machine has torch: the case needs a PATH without it")
    env = {"PATH": path, "HOME": str(tmp_path), "NO_COLOR": "1", "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        ["ddp-doctor", "check", "--format", "json"], capture_output=True, text=True, env=env, timeout=180, check=False
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    by_id = {r["id"]: r for r in report["results"]}
    assert report["root_cause"] == "env.python"
    assert by_id["env.python"]["summary"] == "no training environment found: activate it or pass --python"
    assert report["headline"].startswith("Distributed training was not checked: no training environment found")
    assert not [r for r in report["results"] if r["id"].startswith("live.")]  # nothing launched with it
    own = str(tmp_path / "pipx" / "venvs" / "ddp-doctor")
    for r in report["results"]:
        assert own not in (r.get("remedy") or ""), (r["id"], r["remedy"])  # never install into the doctor's venv
    assert by_id["env.torch.installed"]["status"] == "skip"
    assert "--python" in by_id["env.python"]["remedy"] and "python3 -m venv" in by_id["env.python"]["remedy"]
    bench = subprocess.run(["ddp-doctor", "bench"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert bench.returncode == 2
    expected = (
        "ddp-doctor: error: no training environment found: activate it or pass --python "
        "(no torchrun and no python3/python with torch on PATH)"
    )
    assert bench.stderr.strip().splitlines() == [expected]


def test_a_doctor_in_the_activated_environment_still_advises_installing_there(tmp_path: Path) -> None:
    """pip install ddp-doctor into the user's own venv, torch missing: that venv is the training one."""
    bin_dir = _tool_install(tmp_path)
    venv = tmp_path / "pipx" / "venvs" / "ddp-doctor"
    env = {
        "PATH": f"{venv}/bin:{bin_dir}:/usr/bin:/bin",
        "VIRTUAL_ENV": str(venv),
        "HOME": str(tmp_path),
        "NO_COLOR": "1",
    }
    proc = subprocess.run(
        ["ddp-doctor", "check", "--static", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    report = json.loads(proc.stdout)
    by_id = {r["id"]: r for r in report["results"]}
    assert by_id["env.python"]["status"] == "pass"
    assert by_id["env.torch.installed"]["status"] == "fail"
    assert f"{venv}/bin/python" in by_id["env.torch.installed"]["remedy"]


def test_choosing_the_target_loads_no_check_unit() -> None:
    # The target is resolved before anything is launched; its words come from the typed facts, not from a
    # unit, so the registry and its units are not imported on the way to torchrun.
    probe = (
        "import sys, ddp_doctor.env.target; print(sorted(m for m in sys.modules if m.startswith('ddp_doctor.checks.')))"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    loaded = json.loads(ran.stdout.replace("'", '"'))
    assert "ddp_doctor.checks.facts.software" in loaded
    assert not [m for m in loaded if m.startswith(("ddp_doctor.checks.registry", "ddp_doctor.checks.units"))]
