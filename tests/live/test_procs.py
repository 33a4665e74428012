"""The run's processes are found through /proc, also a child whose parent was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ddp_doctor.live import procs

# A rank in a session of its own (as torchrun starts it) with one child (as a DataLoader worker).
_RANK = """
import os, subprocess, sys, time
os.setsid()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(sys.argv[1], "w").write(f"{os.getpid()} {child.pid}")
time.sleep(60)
"""


def _wait_for(path: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def test_a_child_of_a_killed_rank_is_still_found_by_its_session(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    launcher = subprocess.Popen([sys.executable, "-c", _RANK, str(pids)])
    rank, worker = (int(p) for p in _wait_for(pids).split())
    try:
        seen = procs.descendants(launcher.pid)
        assert {rank, worker} <= set(seen)  # the rank is the launcher itself after its setsid
        os.kill(worker, 0)
        launcher.kill()  # the OOM killer ends the rank; its child is reparented away from the tree
        launcher.wait(timeout=30)
        assert worker not in procs.descendants(launcher.pid)
        found = procs.descendants(launcher.pid, seen)
        assert worker in found and procs.alive({worker: found[worker]})
        assert procs.end_all({worker: found[worker]}, grace_s=5) == 1
        assert not procs.alive({worker: found[worker]})
    finally:
        for pid in (worker, rank):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_session_whose_leader_is_a_new_process_is_not_ours() -> None:
    # A leader alive with another start time than the one seen is a reused pid, not the rank we saw.
    other = subprocess.Popen([sys.executable, "-c", "import os, time; os.setsid(); time.sleep(60)"])
    try:
        deadline = time.monotonic() + 30
        while os.getsid(other.pid) != other.pid and time.monotonic() < deadline:
            time.sleep(0.02)
        start = procs.descendants(os.getpid())[other.pid]
        nobody = 1 << 30  # above any pid_max: a root with no tree, so only the session can find it
        assert other.pid in procs.descendants(nobody, {other.pid: start})
        assert other.pid not in procs.descendants(nobody, {other.pid: start + 1})
    finally:
        other.kill()
        other.wait(timeout=30)
