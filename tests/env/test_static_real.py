"""`ddp-doctor check --static` on real conditions: this machine, a private mount namespace with a
64 MB /dev/shm, PATHs with and without torchrun, broken torch packages, a fresh venv without torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.env import checks
from ddp_doctor.env.probes import nccl_probe, torch_probe
from ddp_doctor.report import Report, Status
from tests.conftest import ROOT, run_cli

BIN = str(Path(sys.executable).parent)


def static_json(
    env: dict[str, str] | None = None, timeout: float = 180
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = run_cli("check", "--static", "--format", "json", env=env, timeout=timeout)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, json.loads(proc.stdout)


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in report["results"]}


@pytest.fixture(scope="module")
def this_machine() -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    return static_json(env={"PATH": f"{BIN}:{os.environ.get('PATH', '')}"})


def test_this_machine_cpu_torch(this_machine: tuple[subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    proc, report = this_machine
    assert proc.returncode == 0, proc.stdout
    facts, results = report["facts"], by_id(report)
    assert facts["torch"]["flavour"] == "cpu" and facts["torch"]["version"].startswith("2.13.0")
    assert facts["torch"]["backends"]["gloo"] is True and facts["torch"]["backends"]["nccl"] is False
    assert results["env.torch.import"]["status"] == "pass"
    assert results["env.distributed"]["status"] == "pass" and "gloo" in results["env.distributed"]["summary"]
    assert results["env.torchrun"]["status"] == "pass"
    for id_ in ("env.gpus", "env.driver_cuda", "env.gpu_arch", "env.gpu_topology", "env.nccl"):
        assert results[id_]["status"] == "skip", (id_, results[id_])
    assert "no NVIDIA driver" in results["env.gpus"]["summary"]
    assert results["env.shm"]["status"] == "pass"


def test_recorded_facts_are_judged_again_the_same(
    this_machine: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    _, report = this_machine
    again = {r.id: r.status.value for r in checks.evaluate(report["facts"])}
    assert again == {r["id"]: r["status"] for r in report["results"]}
    Report.from_dict(report)  # the JSON contract reads back


def test_parent_never_imports_torch() -> None:
    code = "import sys; from ddp_doctor.env import facts; f = facts.gather(); print(f['torch']['importable'], 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.stdout.split() == ["True", "False"], out.stderr


def test_gather_without_torch_probe_imports_no_torch_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from ddp_doctor.env import facts

    # "Without the probe" means the child that imports torch never starts (what made it slow); asserted
    # directly, not as a wall-clock bound, which a loaded machine breaks.
    def no_import(**_: Any) -> dict[str, Any]:
        raise AssertionError("the torch import probe ran")

    monkeypatch.setattr(torch_probe, "run_import", no_import)
    f = facts.gather(probe_torch=False)
    assert f["torch"]["installed"] is True and f["torch"]["importable"] is None and f["torch"]["flavour"] == "cpu"
    r = {x.id: x for x in checks.evaluate(f)}
    assert r["env.torch.import"].status is Status.SKIP


@pytest.mark.root
def test_64mb_shm_in_a_private_mount_namespace_fails() -> None:
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    script = f"mount -t tmpfs -o size=64m tmpfs /dev/shm && {sys.executable} -m ddp_doctor check --static --format json"
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    if proc.returncode not in (0, 1) and "unshare" in proc.stderr:
        pytest.skip(f"no mount namespaces here: {proc.stderr.strip()}")
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    shm = by_id(report)["env.shm"]
    assert shm["status"] == "fail" and "64 MiB" in shm["summary"], shm
    # no GPU here: the shared rule (checks/knowledge.yaml) sizes for a node of 8 GPUs, 4 GiB each
    assert "--shm-size=32g" in shm["remedy"] and "emptyDir" in shm["remedy"]
    assert proc.returncode == 1 and report["verdict"] == "fail"
    # the host's /dev/shm is untouched
    assert os.statvfs("/dev/shm").f_blocks * os.statvfs("/dev/shm").f_frsize > 256 << 20


def test_path_without_torchrun_warns_and_names_the_fallback() -> None:
    proc, report = static_json(env={"PATH": "/usr/bin:/bin"})
    r = by_id(report)["env.torchrun"]
    assert r["status"] == "warn", r
    assert "not on PATH" in r["summary"] and "-m torch.distributed.run" in r["summary"]
    assert f"export PATH={BIN}:$PATH" in r["remedy"]
    assert proc.returncode == 0


def test_torchrun_of_another_environment_warns(tmp_path: Path) -> None:
    other = tmp_path / "otherenv" / "bin"
    other.mkdir(parents=True)
    script = other / "torchrun"
    script.write_text("#!/usr/bin/python3\nimport sys\nsys.exit(0)\n")
    script.chmod(0o755)
    # Without --python the torchrun's own interpreter would be the target (what `torchrun train.py`
    # runs); with --python naming this venv, the foreign torchrun first on PATH is the finding.
    proc = run_cli(
        "check",
        "--static",
        "--format",
        "json",
        "--python",
        sys.executable,
        env={"PATH": f"{other}:{BIN}:/usr/bin:/bin"},
    )
    r = by_id(json.loads(proc.stdout))["env.torchrun"]
    assert r["status"] == "warn" and str(script) in r["summary"] and "/usr/bin/python3" in r["summary"], r


def test_without_python_flag_the_torchrun_on_path_chooses_the_target(tmp_path: Path) -> None:
    other = tmp_path / "otherenv" / "bin"
    other.mkdir(parents=True)
    script = other / "torchrun"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(0)\n")
    script.chmod(0o755)
    _, report = static_json(env={"PATH": f"{other}:/usr/bin:/bin"})
    assert report["facts"]["target"] == {
        "python": sys.executable,
        "source": "torchrun",
        "reason": f"the interpreter of the torchrun on PATH, {script}",
        "own": True,
    }
    assert str(script) in report["target"]["python"]


def _fake_torch(root: Path, body: str) -> Path:
    pkg = root / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    return root


def test_broken_torch_import_keeps_the_real_error(tmp_path: Path) -> None:
    site = _fake_torch(
        tmp_path,
        """
        raise ImportError("libcudnn.so.9: cannot open shared object file: No such file or directory")
    """,
    )
    proc, report = static_json(env={"PYTHONPATH": str(site)})
    r = by_id(report)["env.torch.import"]
    assert r["status"] == "fail" and "libcudnn.so.9: cannot open shared object file" in r["summary"]
    assert "shared library" in r["cause"] and "--force-reinstall" in r["remedy"]
    assert proc.returncode == 1 and report["root_cause"] == "env.torch.import"


def test_torch_import_that_crashes_is_reported_with_the_signal(tmp_path: Path) -> None:
    site = _fake_torch(
        tmp_path,
        """
        import os, signal
        os.kill(os.getpid(), signal.SIGSEGV)
    """,
    )
    proc, report = static_json(env={"PYTHONPATH": str(site)})
    r = by_id(report)["env.torch.import"]
    assert r["status"] == "fail" and "SIGSEGV" in r["summary"], r
    assert proc.returncode == 1


def test_hung_torch_import_is_bounded_and_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pid_file = tmp_path / "child.pid"
    site = _fake_torch(
        tmp_path / "site",
        f"""
        import os, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(600)
    """,
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    start = time.monotonic()
    result = torch_probe.run_import(timeout_s=2.0)
    # A bound for a hang (the child sleeps 600 s), wide enough for a loaded machine: the words say the deadline decided.
    assert time.monotonic() - start < 60
    assert result["importable"] is False and "did not finish within 2 s" in result["import_error"]
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the hung child did not outlive its deadline


def test_nccl_loader_reports_real_load_errors(tmp_path: Path) -> None:
    missing = nccl_probe.load(str(tmp_path / "libnccl.so.2"))
    assert missing["loadable"] is False and "libnccl.so.2" in missing["error"]
    libc = next(
        (
            p
            for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib64/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6")
            if Path(p).exists()
        ),
        None,
    )
    if libc:
        wrong = nccl_probe.load(libc)
        assert wrong["loadable"] is False and "not an NCCL library" in wrong["error"]


@pytest.mark.slow
def test_fresh_venv_without_torch_fails_with_install_command(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    deps = ["rich>=13", "PyYAML>=6", "nvidia-ml-py>=12", "zstandard>=0.22"]
    pip = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *deps],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if pip.returncode != 0:
        pytest.skip(f"cannot install the dependencies from the package index here: {pip.stderr.strip()[-300:]}")
    inst = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert inst.returncode == 0, inst.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(NO_COLOR="1", PATH=f"{venv / 'bin'}:/usr/bin:/bin")
    assert subprocess.run([str(py), "-c", "import torch"], capture_output=True, env=env, check=False).returncode != 0
    proc = subprocess.run(
        [str(venv / "bin" / "ddp-doctor"), "check", "--static"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "env.torch.installed" in proc.stdout and "torch is not installed" in proc.stdout
    assert "root cause: env.torch.installed" in proc.stdout
    as_json = subprocess.run(
        [str(venv / "bin" / "ddp-doctor"), "check", "--static", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    remedy = by_id(json.loads(as_json.stdout))["env.torch.installed"]["remedy"]
    assert f"{py} -m pip install" in remedy and "--index-url https://download.pytorch.org/whl/cpu" in remedy


def test_environment_variables_limits_and_kubernetes_in_a_real_run() -> None:
    import resource

    def low_nofile() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    env = {
        "NCCL_SOCKET_IFNAME": "nosuchif0",
        "NCCL_P2P_DISABLE": "1",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
    }
    proc = run_cli("check", "--static", "--format", "json", env=env, preexec_fn=low_nofile)
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    results = by_id(report)
    ev = results["env.env_vars"]
    assert ev["status"] == "fail" and "NCCL_SOCKET_IFNAME=nosuchif0 matches no interface" in ev["summary"]
    assert "NCCL_P2P_DISABLE=1" in results["env.dist_vars"]["summary"]  # NCCL's variables are judged there
    assert results["env.ulimits"]["status"] == "warn" and "nofile 1024" in results["env.ulimits"]["summary"]
    assert "Kubernetes" in results["env.container"]["summary"] or "kubernetes" in results["env.container"]["summary"]
    assert report["facts"]["container"]["kubernetes"] is True
    assert proc.returncode == 1 and report["root_cause"] == "env.env_vars"
