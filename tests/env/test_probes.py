"""The probes on this machine's real kernel interfaces and files, and their pure helpers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ddp_doctor.checks.facts.host import Interface
from ddp_doctor.env.probes import gpu, network, system, torch_probe
from ddp_doctor.env.target import same_environment

DEVICES = [{"index": i, "uuid": f"GPU-{i}aaa-{i}"} for i in range(4)]


def test_cuda_visible_devices_semantics() -> None:
    assert [d["index"] for d in gpu.apply_visible(DEVICES, None)] == [0, 1, 2, 3]
    assert [d["index"] for d in gpu.apply_visible(DEVICES, "2,0")] == [2, 0]
    assert [d["index"] for d in gpu.apply_visible(DEVICES, "GPU-3aaa")] == [3]
    assert [d["index"] for d in gpu.apply_visible(DEVICES, "1,7,2")] == [1]  # CUDA stops at the first bad entry
    assert gpu.apply_visible(DEVICES, "") == [] and gpu.apply_visible(DEVICES, "-1") == []


def test_nvml_without_a_driver_is_a_fact_not_a_crash() -> None:
    facts = gpu.probe()
    if Path("/dev/nvidiactl").exists():
        return  # a real GPU machine: covered by the recorded fixture
    assert facts["driver_loaded"] is False and facts["count"] == 0 and facts["error"]


def test_interfaces_include_loopback_with_its_address() -> None:
    lo = next(i for i in network.interfaces() if i.name == "lo")
    assert lo.loopback is True and "127.0.0.1" in lo.addresses
    # The facts hold it as from_dict reads it back.
    assert Interface.from_dict(lo.to_dict()) == lo and isinstance(lo.to_dict()["addresses"], list)


def test_shm_is_read_from_statvfs() -> None:
    st = os.statvfs("/dev/shm")
    assert system.shm()["size_bytes"] == st.f_frsize * st.f_blocks


def test_shebang_forms(tmp_path: Path) -> None:
    direct = tmp_path / "direct"
    direct.write_text("#!/opt/env/bin/python3.12\nimport sys\n")
    trampoline = tmp_path / "trampoline"
    trampoline.write_text("#!/bin/sh\n'''exec' /very/long/path/env/bin/python \"$0\" \"$@\"\n' '''\nimport sys\n")
    via_env = tmp_path / "via_env"
    via_env.write_text("#!/usr/bin/env python3\n")
    assert system.shebang_python(direct) == "/opt/env/bin/python3.12"
    assert system.shebang_python(trampoline) == "/very/long/path/env/bin/python"
    assert system.shebang_python(via_env)  # resolved on PATH (or left as the name)


def test_own_interpreter_counts_as_same_env() -> None:
    assert same_environment(sys.executable, sys.executable) is True
    if sys.prefix != "/usr":
        assert same_environment("/usr/bin/python3", sys.executable) in (False, None)


def test_version_file_is_read_without_importing(tmp_path: Path) -> None:
    (tmp_path / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.7.0+cu126'\ndebug = False\n"
        "cuda: Optional[str] = '12.6'\ngit_version = '1341e1'\nhip: Optional[str] = None\n"
    )
    fields = torch_probe.read_version_file(tmp_path)
    assert fields == {"__version__": "2.7.0+cu126", "cuda": "12.6", "git_version": "1341e1", "hip": None}


def test_metadata_of_the_installed_torch() -> None:
    meta = torch_probe.metadata()
    assert meta["installed"] is True and meta["version"].startswith("2.13.0")
    assert meta["cuda"] is None and meta["location"].endswith("torch")
    # metadata() itself must not import torch:
    code = "import sys; from ddp_doctor.env.probes import torch_probe; torch_probe.metadata(); print('torch' in sys.modules)"
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.strip() == "False", out.stderr
