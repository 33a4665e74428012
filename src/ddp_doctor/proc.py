"""Run a child process under a deadline; on the way out, end its whole process group. Run work on a
thread under a deadline (Background). SIGTERM becomes KeyboardInterrupt (`on_terminate`), so every
`finally` on the way out runs; `end_children` ends the children still running when the command
stops (a Background thread's probe, say)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

GRACE_S = 3.0
_RUNNING: set[subprocess.Popen[bytes]] = set()
"""Children of run() not yet reaped, across threads (set add/discard are atomic)."""
terminated_by: int | None = None
"""The signal that on_terminate turned into KeyboardInterrupt, if one did."""
_DIE_WITH_PARENT = (
    "import os, signal, sys\n"
    "try:\n"
    "    import ctypes\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)\n"  # PR_SET_PDEATHSIG
    "except Exception:\n"  # a Python without ctypes (no libffi in a slim image), no prctl: run it all the same
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"  # the parent died before prctl: nobody would signal this one
    "    os._exit(137)\n"
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as exc:\n"
    "    sys.stderr.write(f'cannot start {sys.argv[2]}: {exc.strerror}\\n')\n"
    "    os._exit(127)\n"
)


def on_terminate(signum: int, frame: object) -> None:
    """A SIGTERM handler: unwind like Ctrl-C, so temp files, run directories and children go."""
    global terminated_by
    terminated_by = signum
    raise KeyboardInterrupt


def end_children(grace_s: float = 1.0) -> None:
    """End the process group of every run() child still running (its thread may not get to)."""
    for child in list(_RUNNING):
        kill_group(child, grace_s)


def dying_with_us(argv: Sequence[str]) -> list[str]:
    """argv behind a small exec wrapper that sets PR_SET_PDEATHSIG first, so the kernel SIGKILLs the child
    when this process dies without cleaning up (SIGKILL, the OOM killer): a child in a session of its own is
    reached by no signal of ours then. The signal follows the thread that started the child (prctl(2)):
    start it from a thread that outlives it. `-I -S`: the wrapper reads no PYTHON* variable and no site;
    the environment reaches argv unchanged."""
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *argv]


def _startable(program: str, env: Mapping[str, str] | None, cwd: str | None) -> bool:
    """Whether exec would find program (as Popen looks for it), so a missing one is said as before the wrapper."""
    if "/" in program:
        path = os.path.join(cwd, program) if cwd else program
        return os.path.isfile(path) and os.access(path, os.X_OK)
    return shutil.which(program, path=(env if env is not None else os.environ).get("PATH", os.defpath)) is not None


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int | None
    """None when the deadline ended the process."""
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = GRACE_S) -> None:
    """SIGTERM to the group, a grace period, then SIGKILL; the child is reaped either way."""
    try:
        pgid = os.getpgid(proc.pid)
    except ProcessLookupError:
        pgid = None
    if pgid is not None:
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                continue
            # The leader is gone; members may linger, so SIGKILL whatever remains.
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass


def run(
    argv: Sequence[str],
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    max_output_bytes: int = 4 << 20,
) -> Completed:
    """Run argv to completion or until `timeout_s`; output is decoded leniently and capped. The child dies
    with this process (dying_with_us): also one started just as a signal unwinds the command, or from a
    thread still running when it ends, which no end_children() would reach."""
    start = time.monotonic()
    if not _startable(argv[0], env, cwd):
        return Completed(tuple(argv), 127, "", f"{argv[0]}: not found, or not an executable file", 0.0, False)
    try:
        proc = subprocess.Popen(
            dying_with_us(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return Completed(tuple(argv), 127, "", f"{argv[0]}: {exc.strerror or exc}", 0.0, False)
    timed_out = False
    _RUNNING.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
        out, err = proc.communicate()
    except BaseException:
        kill_group(proc)
        raise
    else:
        # A child may have left grandchildren in its group; they do not outlive us.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    finally:
        _RUNNING.discard(proc)
    return Completed(
        argv=tuple(argv),
        returncode=None if timed_out else proc.returncode,
        stdout=out[-max_output_bytes:].decode("utf-8", "replace"),
        stderr=err[-max_output_bytes:].decode("utf-8", "replace"),
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
    )


class Background(Generic[T]):
    """Work on a daemon thread, waited for with a deadline: a hung driver call or probe cannot hang
    the doctor (a thread that does not answer in time is left behind and ends with the process)."""

    def __init__(self, name: str, fn: Callable[[], T]) -> None:
        self.name = name
        """Says what did not answer: 'the NVML probe'."""
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"ddp-doctor {name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # noqa: BLE001 - reported as why there is no value
            self._error = exc

    def result(self, timeout_s: float) -> tuple[T | None, str | None]:
        """The value, or None and why not ('the NVML probe did not answer within 20 s')."""
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            return None, f"{self.name} did not answer within {timeout_s:g} s"
        if self._error is not None:
            return None, f"{self.name} broke: {type(self._error).__name__}: {self._error}"
        return self._value, None
