"""Ctrl-C on a real terminal (a pty): the job and the doctor stop cleanly and the report is written."""

from __future__ import annotations

import json
import os
import pty
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.jobwatch.runner import env, job_copy, processes_with, torchrun

pytestmark = pytest.mark.slow


def test_ctrl_c_on_the_terminal_stops_job_and_doctor_and_writes_the_report(tmp_path: Path) -> None:
    job = job_copy(tmp_path)
    run_dir = tmp_path / "run"
    report = tmp_path / "report.json"
    argv = [
        sys.executable,
        "-m",
        "ddp_doctor",
        "run",
        "--run-dir",
        str(run_dir),
        "--format",
        "json",
        "--output",
        str(report),
        "--",
        *torchrun(job, 2, "--mode", "forever"),
    ]
    pid, fd = pty.fork()
    if pid == 0:  # the child: the doctor, as the foreground job of a terminal
        os.chdir(tmp_path)
        os.execve(sys.executable, argv, env())
    output = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            output.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while b"rank 1 step 3" not in output and time.monotonic() < deadline:
            time.sleep(0.2)
        assert b"rank 1 step 3" in output, output[-2000:]
        os.write(fd, b"\x03")  # the terminal turns ^C into SIGINT for its foreground process group
        deadline = time.monotonic() + 90
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the doctor did not stop within 90 s of Ctrl-C")
    finally:
        reader.join(timeout=5)
        os.close(fd)
    data = json.loads(report.read_text())
    run = data["facts"]["run"]
    assert run["interrupted"] is True and "SIGINT" in run["signals"]
    job_result = next(r for r in data["results"] if r["id"] == "run.job")
    assert job_result["status"] == "warn" and "interrupted" in job_result["summary"]
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0
    assert not processes_with(str(job))
