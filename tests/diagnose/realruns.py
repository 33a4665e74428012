"""Real failing distributed runs on CPU (the real torchrun, gloo), each under a deadline.

Used live by test_real_runs.py and, via `python -m tests.diagnose.realruns DIR`, to record the
fixtures under tests/fixtures/logs/ that the fast parser tests read.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ddp_doctor.proc import run

SCRIPT = str(Path(__file__).resolve().parent / "scripts" / "failing.py")
BIN = Path(sys.executable).parent
TORCHRUN = str(BIN / "torchrun") if (BIN / "torchrun").exists() else (shutil.which("torchrun") or "torchrun")


@dataclass(frozen=True)
class Case:
    name: str
    root_cause: str
    needs_root: bool
    start: Callable[[], tuple[list[str], dict[str, str]]]
    """argv and extra env; called just before the run so ports are fresh."""
    hangs_s: float | None = None
    """The failure is a hang (as users see it): capture the output for this long, then end the run."""
    snapshot: bool = False
    """With hangs_s: the log is what was printed before the run was ended (a user copying a stuck job's
    output), not what the launcher prints while being stopped."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TORCH_CPP_LOG_LEVEL": "WARNING"})
    return env


CASES = {
    c.name: c
    for c in (
        # A private mount namespace with a 64 MB /dev/shm, as Docker gives a container by default.
        Case(
            "shm_64mb",
            "diag.shm_exhausted",
            True,
            lambda: (
                [
                    "unshare",
                    "-m",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    f"mount -t tmpfs -o size=64m tmpfs /dev/shm && exec {TORCHRUN} --standalone --nproc-per-node 2 {SCRIPT} shm",
                ],
                {},
            ),
        ),
        Case(
            "sigkill_rank",
            "diag.sigkill_oom",
            False,
            lambda: ([TORCHRUN, "--standalone", "--nproc-per-node", "2", SCRIPT, "sigkill"], {}),
        ),
        Case(
            "world_size_mistake",
            "diag.rendezvous_timeout",
            False,
            lambda: ([sys.executable, SCRIPT, "worldsize"], {"MASTER_PORT": str(_free_port())}),
        ),
        Case(
            "rendezvous_missing_node",
            "diag.rendezvous_timeout",
            False,
            lambda: (
                [
                    TORCHRUN,
                    "--nnodes",
                    "2",
                    "--node-rank",
                    "0",
                    "--nproc-per-node",
                    "1",
                    "--rdzv-backend",
                    "c10d",
                    "--rdzv-endpoint",
                    f"127.0.0.1:{_free_port()}",
                    "--rdzv-id",
                    f"t{random.randrange(1 << 30)}",
                    "--rdzv-conf",
                    "join_timeout=5",
                    SCRIPT,
                    "init",
                ],
                {},
            ),
        ),
        Case(
            "gloo_wrong_interface",
            "diag.wrong_interface",
            False,
            lambda: (
                [TORCHRUN, "--standalone", "--nproc-per-node", "2", SCRIPT, "init"],
                {"GLOO_SOCKET_IFNAME": "nosuch0"},
            ),
        ),
        # The near miss at run level: a healthy job with every log switch on must show no failure.
        Case(
            "healthy_verbose",
            "",
            False,
            lambda: (
                [TORCHRUN, "--standalone", "--nproc-per-node", "2", SCRIPT, "init"],
                {"LOGLEVEL": "INFO", "TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
            ),
        ),
        # Ranks stop inside a collective with no error (gloo's timeout is an hour away); rank 1 never enters it.
        Case(
            "hang_in_collective",
            "diag.hang",
            False,
            lambda: (
                [TORCHRUN, "--standalone", "--nproc-per-node", "2", SCRIPT, "hang"],
                {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "TORCH_CPP_LOG_LEVEL": "INFO"},
            ),
            hangs_s=25.0,
            snapshot=True,
        ),
        # A rank dies in native code: Python's faulthandler names the signal and the frames.
        Case(
            "sigsegv_rank",
            "diag.fatal_signal",
            False,
            lambda: ([TORCHRUN, "--standalone", "--nproc-per-node", "2", SCRIPT, "segv"], {"PYTHONFAULTHANDLER": "1"}),
        ),
        # glibc's heap check aborts a rank: the message names the library, torchrun the signal.
        Case(
            "double_free_rank",
            "diag.fatal_signal",
            False,
            lambda: ([TORCHRUN, "--standalone", "--nproc-per-node", "2", SCRIPT, "doublefree"], {}),
        ),
        # torchrun retries an unresolvable master forever; a user sees the warnings and stops it. c10d's retry
        # warning repeated is the failure (diag.master_retry: a WARN once, a FAIL from its third line on).
        Case(
            "master_unresolvable",
            "diag.master_retry",
            False,
            lambda: (
                [
                    TORCHRUN,
                    "--nnodes",
                    "1",
                    "--nproc-per-node",
                    "1",
                    "--master-addr",
                    "no-such-host.invalid",
                    "--master-port",
                    str(_free_port()),
                    SCRIPT,
                    "init",
                ],
                {},
            ),
            hangs_s=8.0,
        ),
    )
}


def run_case(name: str, timeout_s: float = 90.0) -> tuple[str, int | None]:
    """The combined output (as a user's terminal shows it) and the exit status."""
    if name == "port_in_use":
        return _port_in_use(timeout_s)
    case = CASES[name]
    argv, extra = case.start()
    if case.snapshot and case.hangs_s:
        return _snapshot(argv, {**_env(), **extra}, case.hangs_s), None
    done = run(argv, timeout_s=case.hangs_s or timeout_s, env={**_env(), **extra})
    return done.stdout + done.stderr, done.returncode


def _snapshot(argv: list[str], env: dict[str, str], wait_s: float) -> str:
    """What a stuck run has printed after wait_s (as a user copies it from the terminal); then it is ended."""
    import subprocess
    import tempfile
    import time

    from ddp_doctor.proc import kill_group

    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.5)
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
        finally:
            kill_group(proc)
    return text


def _port_in_use(timeout_s: float) -> tuple[str, int | None]:
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = run(
            [
                TORCHRUN,
                "--nnodes",
                "1",
                "--nproc-per-node",
                "2",
                "--master-addr",
                "127.0.0.1",
                "--master-port",
                str(port),
                SCRIPT,
                "init",
            ],
            timeout_s=timeout_s,
            env=_env(),
        )
    return done.stdout + done.stderr, done.returncode


ALL = (*CASES, "port_in_use")
ROOT_CAUSE = {**{n: c.root_cause for n, c in CASES.items()}, "port_in_use": "diag.port_in_use"}


if __name__ == "__main__":
    out = Path(sys.argv[1])  # python -m tests.diagnose.realruns DIR [CASE ...]
    out.mkdir(parents=True, exist_ok=True)
    for case in sys.argv[2:] or ALL:
        text, code = run_case(case)
        (out / f"cpu-{case.replace('_', '-')}.log").write_text(text, encoding="utf-8")
        print(f"{case}: exit {code}, {len(text.splitlines())} lines")
