"""An interpreter in the image is a link followed inside the image root, never on the host: a venv
whose bin/python3 points at a Python the image lacks is no working Python (image.python FAIL), even
when the host has a file at that path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.image.test_audit import rootfs_image

VENV_SP = "opt/venv/lib/python3.11/site-packages"
HOST_PYTHON = "/usr/bin/python3"  # exists on this machine: the audit must not see it


def _venv_rootfs(root: Path, with_base_python: bool) -> Path:
    files = {
        "etc/os-release": b'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n',
        "opt/venv/pyvenv.cfg": b"home = /usr/bin\nversion = 3.11.2\n",
        f"{VENV_SP}/torch/__init__.py": b"",
        f"{VENV_SP}/torch/version.py": b"__version__ = '2.5.1+cpu'\ncuda = None\nhip = None\n",
        f"{VENV_SP}/torch-2.5.1.dist-info/METADATA": b"Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1+cpu\n",
        "opt/venv/bin/torchrun": b"#!/opt/venv/bin/python3\nfrom torch.distributed.run import main\nmain()\n",
    }
    if with_base_python:
        files[HOST_PYTHON.lstrip("/")] = b"\x7fELF the image's own interpreter"
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        os.chmod(p, 0o755)
    (root / "opt/venv/bin/python3").symlink_to(HOST_PYTHON)
    (root / "opt/venv/bin/python").symlink_to("python3")
    return root


def _python_result(path: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    proc = run_cli("image", str(path), "--format", "json", console=True)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    return proc.returncode, next(r for r in report["results"] if r["id"] == "image.python")


@pytest.mark.parametrize("form", ["rootfs dir", "oci layout"])
def test_a_venv_linked_to_a_python_the_image_lacks_fails(tmp_path: Path, form: str) -> None:
    assert Path(HOST_PYTHON).is_file()  # the host has it: following the host's file would pass
    rootfs = _venv_rootfs(tmp_path / "rootfs", with_base_python=False)
    path = rootfs if form == "rootfs dir" else rootfs_image(tmp_path, rootfs)
    rc, result = _python_result(path)
    assert rc == 1 and result["status"] == "fail", result
    assert result["summary"] == (
        "no working python interpreter in the image: /opt/venv/bin/python3 -> /usr/bin/python3, "
        "which the image does not contain"
    )
    assert "copy the venv into a stage with the same Python" in result["remedy"]


def test_the_same_venv_passes_when_the_image_has_its_python(tmp_path: Path) -> None:
    rootfs = _venv_rootfs(tmp_path / "rootfs", with_base_python=True)
    _, result = _python_result(rootfs_image(tmp_path, rootfs))
    assert result["status"] == "pass", result
    assert "torch's is /opt/venv/bin/python3" in result["summary"]


def test_torchs_venv_broken_beside_a_working_system_python_fails(tmp_path: Path) -> None:
    rootfs = _venv_rootfs(tmp_path / "rootfs", with_base_python=False)
    (rootfs / "usr/local/bin").mkdir(parents=True)
    (rootfs / "usr/local/bin/python3.12").write_bytes(b"\x7fELF another Python")
    _, result = _python_result(rootfs_image(tmp_path, rootfs))
    assert result["status"] == "fail", result
    assert result["summary"].startswith("torch's environment /opt/venv has no working interpreter: ")
