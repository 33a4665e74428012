"""End to end: the generated docker script runs a real container (podman behind a `docker`
shim, the host's root filesystem as the image): its preflight container, then `ddp-doctor check`, pass inside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from ddp_doctor.cli import main
from tests.image.conftest import Podman

IMAGE = "localhost/ddp-doctor/host-rootfs:1"
# The shim stands in for docker: same argv, podman underneath, the host root (read-only overlay)
# in place of the image. Everything else is the generated script's own flags.
# One exception: this sandbox's hard limits (nofile 20000, memlock 8 MiB, no CAP_SYS_RESOURCE) make
# runc refuse any --ulimit, so the shim drops those two pairs; on a GPU host they apply as generated.
# The script's other engine calls (inspect, rm: it reads the container's own exit status back) pass through.
SHIM = """#!/bin/sh
[ "$1" = run ] || exec {podman} "$@"
skip=0
first=1
for a in "$@"; do
  if [ "$first" = 1 ]; then set --; first=0; fi
  if [ "$skip" = 1 ]; then skip=0
  elif [ "$a" = --ulimit ]; then skip=1
  elif [ "$a" = "{image}" ]; then set -- "$@" --rootfs /:O
  else set -- "$@" "$a"; fi
done
exec {podman} "$@"
"""


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_generated_docker_script_runs_the_check_in_a_container(tmp_path: Path) -> None:
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs podman and root")
    base = Path(tempfile.mkdtemp(prefix="ddpl-", dir="/tmp"))  # podman wants a runroot under 50 characters
    podman = Podman(base)
    try:
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        shim = bin_dir / "docker"
        shim.write_text(SHIM.format(image=IMAGE, podman=" ".join(podman.argv)))
        shim.chmod(0o755)
        script = tmp_path / "run.sh"
        venv_bin = Path(sys.executable).parent
        # uid 0: this machine's Python lives under /root (mode 700); CPU ranks: no GPU here.
        assert (
            main(
                [
                    "launch",
                    "--target",
                    "docker",
                    "--image",
                    IMAGE,
                    "--gpus-per-node",
                    "0",
                    "--cpus",
                    "2",
                    "--memory",
                    "6g",
                    "--shm-size",
                    "2g",
                    "--uid",
                    "0",
                    "--gid",
                    "0",
                    "--allow-root",
                    "--env",
                    f"PATH={venv_bin}:/usr/local/bin:/usr/bin:/bin",
                    "--logs",
                    f"{tmp_path}/logs:/logs",
                    "--preflight",
                    "-o",
                    str(script),
                ]
            )
            == 0
        )
        env = {**podman.env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        proc = subprocess.run(
            ["sh", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=360, check=False
        )
        out = proc.stdout + proc.stderr
        assert "ddp-doctor check" in out, out[-3000:]
        assert proc.returncode == 0, out[-3000:]
        assert "live." in proc.stdout and "verdict: FAIL" not in " ".join(proc.stdout.split()), proc.stdout[-3000:]
        # The preflight's static check ran in its own container first, then the job's check.
        assert proc.stdout.count("ddp-doctor check — host") == 2, proc.stdout[-3000:]
        assert proc.stdout.index("env.shm") < proc.stdout.index("live."), proc.stdout[-3000:]
        names = subprocess.run(
            [*podman.argv, "ps", "-a", "--format", "{{.Names}}"],
            env=podman.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert names.strip() == ""  # each container removed once its exit status was read: nothing left behind
    finally:
        podman.close()
        shutil.rmtree(base, ignore_errors=True)
