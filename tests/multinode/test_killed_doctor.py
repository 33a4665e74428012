"""A multi-node `check` killed by SIGKILL cannot clean up: its torchrun tree ends with it (PR_SET_PDEATHSIG) and
its temp directories are removed by the next doctor on the host."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddp_doctor.live import procs
from ddp_doctor.live.launch import RUN_DIR_PREFIX
from ddp_doctor.live.multinode.node import CLUSTER_DIR_PREFIX


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _check(port: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "ddp_doctor", "check", "--backend", "gloo", "--nproc", "1",
        "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", f"127.0.0.1:{port}", *extra,
    ]  # fmt: skip


def _launched(doctor: subprocess.Popen[bytes], tmp: Path, deadline_s: float) -> dict[int, int]:
    """The doctor's descendants once torchrun runs and both temp directories exist (node 0 waits for node 1)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and doctor.poll() is None:
        tree = procs.descendants(doctor.pid)
        made = list(tmp.glob(f"{CLUSTER_DIR_PREFIX}*")) and list(tmp.glob(f"{RUN_DIR_PREFIX}*"))
        if made and any(b"torchrun" in Path(f"/proc/{p}/cmdline").read_bytes() for p in procs.alive(tree)):
            return tree
        time.sleep(0.2)
    raise AssertionError(f"the check never reached torchrun (exit {doctor.poll()}); temp dir: {os.listdir(tmp)}")


def _ended(tree: dict[int, int], deadline_s: float) -> dict[int, int]:
    end = time.monotonic() + deadline_s
    while procs.alive(tree) and time.monotonic() < end:
        time.sleep(0.1)
    return procs.alive(tree)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_sigkilled_check_leaves_nothing_that_the_next_check_does_not_remove(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    port = _free_port()
    doctor = subprocess.Popen(
        _check(port, "--timeout", "120"), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    tree: dict[int, int] = {}
    try:
        tree = _launched(doctor, tmp_path, 180)
        doctor.kill()
        doctor.wait(timeout=30)
        assert _ended(tree, 30) == {}, "torchrun or a rank outlived the SIGKILLed doctor"
        left = sorted(p.name for p in tmp_path.iterdir())
        assert any(n.startswith(CLUSTER_DIR_PREFIX) for n in left), left
        assert any(n.startswith(RUN_DIR_PREFIX) for n in left), left

        again = subprocess.run(
            _check(_free_port(), "--join-timeout", "2", "--timeout", "10"),
            check=False,
            env=env,
            capture_output=True,
            timeout=300,
        )
        assert again.returncode != 0, "node 1 never came: the second check cannot pass"
        assert sorted(p.name for p in tmp_path.iterdir()) == [], "the next check left the killed one's temp dirs"
    finally:
        doctor.kill()
        doctor.wait(timeout=30)
        procs.end_all(tree, 1.0)
