"""SIGTERM (a scheduler's time limit, `kill`, `docker stop`) ends any command within 5 s, with every
process it started gone and its temp files and run directories removed. Real signals to the real
console script; its descendants are found by a marker in their environment (torchrun puts ranks in
sessions of their own, so the process group would miss them)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import DOCTOR

GRACE_S = 5.0


def _marked(tag: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _catches_sigterm(pid: int) -> bool:
    """The doctor has installed its SIGTERM handler (SigCgt in /proc/PID/status): before that, on a loaded
    machine still importing, SIGTERM's default action would end it and the test would time the start-up."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0")
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


def _ranks_running(tmp: Path) -> bool:
    """A rank has written its heartbeat into a run directory: the ranks are up."""
    return any(tmp.glob("ddp-doctor-run-*/rank-*.hb"))


def _terminate_when(
    args: list[str], tmp: Path, ready: Callable[[], bool], cwd: Path | None = None
) -> tuple[int, str, list[int]]:
    tag = uuid.uuid4().hex
    env = {**os.environ, "TMPDIR": str(tmp), "NO_COLOR": "1", "DDP_DOCTOR_TEST_TAG": tag}
    proc = subprocess.Popen(
        [str(DOCTOR), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    try:
        deadline = time.monotonic() + 120
        while not (ready() and _catches_sigterm(proc.pid)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "never got ready"
            time.sleep(0.05)
        assert len(_marked(tag)) >= 1
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=GRACE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    time.sleep(0.2)  # a child SIGKILLed at the end of the grace is reaped by init
    return proc.returncode, err.decode(), _marked(tag)


@pytest.mark.parametrize("command", [["check", "-q"], ["bench", "-q", "--max-bytes", "64K"]])
def test_sigterm_while_ranks_run_ends_them_and_removes_the_run_directory(tmp_path: Path, command: list[str]) -> None:
    rc, err, left = _terminate_when(command, tmp_path, lambda: _ranks_running(tmp_path))
    assert rc == 128 + signal.SIGTERM, err
    assert err.strip().splitlines()[-1] == "ddp-doctor: terminated"
    assert left == []
    assert list(tmp_path.iterdir()) == []


def test_sigterm_during_the_static_gather_leaves_no_probe_behind(tmp_path: Path) -> None:
    # The torch-import probe is a child started from a thread: it must not outlive the doctor.
    started = time.monotonic()
    rc, err, left = _terminate_when(["check", "--static"], tmp_path, lambda: time.monotonic() - started > 0.6)
    assert rc in (0, 128 + signal.SIGTERM), err
    assert left == [] and list(tmp_path.iterdir()) == []


def test_sigterm_while_explain_waits_on_a_pipe(tmp_path: Path) -> None:
    started = time.monotonic()
    rc, err, left = _terminate_when(["explain", "-"], tmp_path, lambda: time.monotonic() - started > 0.5)
    assert rc == 128 + signal.SIGTERM and err.strip() == "ddp-doctor: terminated"
    assert left == []


def test_sigterm_to_run_reaches_the_job_and_the_report_is_still_written(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    ready = tmp_path / "ready"
    script.write_text(f"import pathlib, time\npathlib.Path({str(ready)!r}).touch()\ntime.sleep(300)\n")
    run_dir = tmp_path / "evidence"
    rc, err, left = _terminate_when(
        ["run", "--run-dir", str(run_dir), "--", "python3", str(script)], tmp_path, ready.exists, cwd=tmp_path
    )
    assert rc == 128 + signal.SIGTERM, err  # the job's own status: it died of the forwarded SIGTERM
    assert left == []
    assert (run_dir / "report.json").is_file()  # the evidence is the user's: kept, by design
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("ddp-doctor-run-")]
