"""The generated docker script exits with the job container's own exit status, through real engines: podman's
CLI, and docker's CLI against podman's API service (where `docker run --rm` itself returns 0 for a container
that exited 3, podman-container-tools/podman#18889). The image is tiny: the host's dash and a fake torchrun that
exits with $FAKE_EXIT."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_doctor.cli import main
from tests.image import imgbuild
from tests.image.conftest import Podman

IMAGE = "localhost/ddp-doctor/exit-status:1"
TORCHRUN = '#!/bin/sh\necho "torchrun $*"\nexit "${FAKE_EXIT:-0}"\n'
# As in test_launch_container.py: runc here refuses any --ulimit, so the shim drops those pairs; the rest of the
# script's engine calls (run, inspect, rm) go to the engine as written.
SHIM = """#!/bin/sh
skip=0
first=1
for a in "$@"; do
  if [ "$first" = 1 ]; then set --; first=0; fi
  if [ "$skip" = 1 ]; then skip=0
  elif [ "$a" = --ulimit ]; then skip=1
  else set -- "$@" "$a"; fi
done
exec {engine} "$@"
"""


def _tiny_rootfs(root: Path) -> Path:
    """/bin/sh (the host's dash with its libraries) and /usr/local/bin/torchrun."""
    (root / "bin").mkdir(parents=True)
    (root / "tmp").mkdir()
    shutil.copy("/bin/dash", root / "bin" / "sh")
    libs = subprocess.run(["ldd", "/bin/dash"], capture_output=True, text=True, check=True, timeout=30).stdout
    for lib in (w for w in libs.split() if w.startswith("/")):
        (root / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lib, root / lib.lstrip("/"))
    fake = root / "usr" / "local" / "bin" / "torchrun"
    fake.parent.mkdir(parents=True)
    fake.write_text(TORCHRUN)
    fake.chmod(0o755)
    return root


@pytest.fixture
def podman() -> Iterator[Podman]:
    if shutil.which("podman") is None or os.geteuid() != 0 or not Path("/bin/dash").exists():
        pytest.skip("needs podman, root and /bin/dash")
    base = Path(tempfile.mkdtemp(prefix="ddpx-", dir="/tmp"))  # podman wants a runroot under 50 characters
    engine = Podman(base)
    try:
        engine("import", str(imgbuild.tar_dir(_tiny_rootfs(base / "rootfs"), base / "rootfs.tar")), IMAGE)
        yield engine
    finally:
        engine.close()
        shutil.rmtree(base, ignore_errors=True)


def _api(podman: Podman) -> subprocess.Popen[bytes]:
    """podman's Docker-compatible API service on a socket of its own, up (or failed) within 60 s."""
    sock = podman.base / "api.sock"
    service = subprocess.Popen(
        [*podman.argv, "system", "service", "--time=0", f"unix://{sock}"], env=podman.env, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while not sock.exists() and service.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sock.exists(), f"podman system service did not start (exit {service.poll()})"
    return service


def _run_script(podman: Podman, tmp_path: Path, engine: str, fake_exit: int, env: dict[str, str]) -> int:
    script = tmp_path / f"job-{fake_exit}.sh"
    flags = ["--gpus-per-node", "0", "--cpus", "1", "--memory", "1g", "--shm-size", "64m", "--uid", "0"]
    flags += ["--gid", "0", "--allow-root", "--env", f"FAKE_EXIT={fake_exit}", "--logs", f"{tmp_path}/logs:/logs"]
    assert (
        main(["launch", "--target", "docker", "--image", IMAGE, *flags, "--script", "train.py", "-o", str(script)]) == 0
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "docker").write_text(SHIM.format(engine=engine))
    (bin_dir / "docker").chmod(0o755)
    full = {**podman.env, **env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp_path)}
    done = subprocess.run(
        ["sh", str(script)], check=False, cwd=tmp_path, env=full, capture_output=True, text=True, timeout=120
    )
    assert "torchrun --standalone" in done.stdout, done.stdout + done.stderr  # the job ran in the container
    return done.returncode


def _left(podman: Podman) -> str:
    return podman("ps", "-a", "--format", "{{.Names}}").strip()


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_script_exits_with_the_containers_status_under_podman(podman: Podman, tmp_path: Path) -> None:
    engine = " ".join(podman.argv)
    assert [_run_script(podman, tmp_path, engine, code, {}) for code in (0, 3)] == [0, 3]
    assert _left(podman) == "" and not list(tmp_path.glob("ddp-doctor-cid.*"))


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_script_exits_with_the_containers_status_under_dockers_cli_on_podmans_api(
    podman: Podman, tmp_path: Path
) -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("needs docker's CLI")
    service = _api(podman)
    try:
        env = {"DOCKER_HOST": f"unix://{podman.base / 'api.sock'}"}
        assert [_run_script(podman, tmp_path, docker, code, env) for code in (0, 3)] == [0, 3]
        assert _left(podman) == "" and not list(tmp_path.glob("ddp-doctor-cid.*"))
    finally:
        service.terminate()
        service.wait(timeout=30)
