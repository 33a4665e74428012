"""proc.Background: work on a thread under a deadline (the NVML probe, the torch import probe, the live
chain's static gather); a call that never returns cannot hang the doctor. proc.dying_with_us: a child in
its own session still ends when the doctor is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ddp_doctor.proc import Background, dying_with_us, run


def test_value_error_and_silence_each_say_what_happened() -> None:
    assert Background("the sum", lambda: 1 + 1).result(5) == (2, None)

    def broken() -> int:
        raise OSError("driver gone")

    assert Background("the NVML probe", broken).result(5) == (None, "the NVML probe broke: OSError: driver gone")
    never = threading.Event()
    started = time.monotonic()
    value, why = Background("the hung probe", lambda: never.wait(60)).result(0.2)
    assert value is None and why == "the hung probe did not answer within 0.2 s"
    assert time.monotonic() - started < 30  # the deadline, not the call, decided (a generous bound: no timing test)
    never.set()


_PARENT = (
    "import subprocess, sys, time\n"
    "from ddp_doctor.proc import dying_with_us\n"
    "child = subprocess.Popen(dying_with_us(['sleep', '120']), start_new_session=True)\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(120)\n"
)


def _gone(pid: int, deadline_s: float) -> bool:
    """Whether pid is gone (or a zombie) before the deadline; polled, so no timing is asserted."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_child_started_dying_with_us_ends_when_its_parent_is_sigkilled() -> None:
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        while not Path(f"/proc/{child}/cmdline").read_text().startswith("sleep") and time.monotonic() < deadline:
            time.sleep(0.05)  # until the wrapper has exec'd: the prctl is set by then
        assert Path(f"/proc/{child}/cmdline").read_text().startswith("sleep"), "the wrapper never exec'd its command"
        assert os.getsid(child) == child, "the child is in a session of its own: no group signal reaches it"
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert _gone(child, 30), "the child outlived its SIGKILLed parent"
    finally:
        parent.kill()
        parent.wait(timeout=30)
        if child and not _gone(child, 0.1):
            os.kill(child, signal.SIGKILL)


def test_a_command_that_cannot_start_says_so_with_127() -> None:
    done = subprocess.run(
        dying_with_us(["/nonexistent/torchrun", "-x"]), check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 127
    assert done.stderr == "cannot start /nonexistent/torchrun: No such file or directory\n"


def test_the_environment_reaches_the_command_unchanged() -> None:
    env = {**os.environ, "PYTHONPATH": "/somewhere", "DDP_DOCTOR_PROBE": "x y"}
    done = subprocess.run(dying_with_us(["env"]), check=False, capture_output=True, text=True, env=env, timeout=60)
    assert "PYTHONPATH=/somewhere\n" in done.stdout and "DDP_DOCTOR_PROBE=x y\n" in done.stdout


_RUNS_A_PROBE = (
    "import sys, time\n"
    "from ddp_doctor.proc import Background, run\n"
    "Background('the probe', lambda: run(['sh', '-c', 'echo $$ > ' + sys.argv[1] + '; exec sleep 120'], 300))\n"
    "time.sleep(120)\n"
)


def test_a_probe_run_from_a_thread_ends_with_a_sigkilled_doctor(tmp_path: Path) -> None:
    marker = tmp_path / "probe.pid"
    doctor = subprocess.Popen([sys.executable, "-c", _RUNS_A_PROBE, str(marker)])
    probe = 0
    try:
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.05)
        probe = int(marker.read_text())
        assert not _gone(probe, 0.1), "the probe is running"
        doctor.send_signal(signal.SIGKILL)
        doctor.wait(timeout=30)
        assert _gone(probe, 30), "the probe outlived the SIGKILLed doctor"
    finally:
        doctor.kill()
        doctor.wait(timeout=30)
        if probe and not _gone(probe, 0.1):
            os.kill(probe, signal.SIGKILL)


def test_run_says_a_missing_program_without_starting_anything(tmp_path: Path) -> None:
    done = run(["/nonexistent/ldconfig", "-p"], timeout_s=30)
    assert (done.returncode, done.stderr) == (127, "/nonexistent/ldconfig: not found, or not an executable file")
    plain = tmp_path / "plain"
    plain.write_text("")
    assert run([str(plain)], timeout_s=30).returncode == 127, "a file without the execute bit"
    assert run(["no-such-program-here"], timeout_s=30, env={"PATH": str(tmp_path)}).returncode == 127


def test_without_ctypes_the_command_still_runs() -> None:
    # A Python built without libffi (a slim image's, where `check --image` runs) has no ctypes: the wrapper
    # must still start the command, only without the death signal.
    wrapper = dying_with_us(["echo", "ran"])
    source, args = wrapper[4], wrapper[5:]
    blocked = f"import sys; sys.modules['ctypes'] = None; sys.argv = ['-c', *{args!r}]; exec({source!r})"
    done = subprocess.run([sys.executable, "-c", blocked], check=False, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "ran\n"), done.stderr
