"""Launch a torchrun job as data, run it under one deadline, always clean up.

Generic: the live chain, `bench` and the multi-node check all start their ranks through
`launch(TorchrunSpec(...))`. The parent never imports torch.

    spec = TorchrunSpec("ddp_doctor.live.worker", rank_config.argv(), nproc=2, backend="gloo",
                      timeout_s=60, env={})
    argv, env = build_command(spec, run_dir)      # pure data: printable, testable
    outcome = launch(spec)                        # RunOutcome; nothing of the run survives it

In `env`, the text `{run_dir}` is replaced by the run's private directory (e.g. for
NCCL_DEBUG_FILE={run_dir}/nccl.%p.log).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypedDict

from ddp_doctor import proc as proc_mod
from ddp_doctor import torchrun
from ddp_doctor.env.target import same_environment, shebang_python
from ddp_doctor.live import procnet, procs
from ddp_doctor.rundir import layout, owner, reader
from ddp_doctor.rundir.errorfile import ErrorFile
from ddp_doctor.rundir.logs import parse_exit_codes, tails
from ddp_doctor.rundir.records import Heartbeat, RankResult

GRACE_S = 3.0
RUN_DIR_PREFIX = "ddp-doctor-run-"
"""In a run directory: 'HOST PID' of the doctor that made it; removed when the directory is kept."""
STACK_WAIT_S = 1.5
POLL_S = 0.05
LOG_TAIL_LINES = 200
TORCHRUN_MONITOR_INTERVAL_S = 0.1
UNIX_PATH_MAX = 107
_SRC_DIR = str(Path(__file__).resolve().parents[2])


class Cleanup(TypedDict):
    """What the launcher removed after the run (the report's facts show it as it is)."""

    processes: int
    """The run's processes still alive at the end, which it ended."""
    shm: list[str]
    """The /dev/shm entries the run made and left, which it removed."""


@dataclass(frozen=True)
class TorchrunSpec:
    """One torchrun job on this node."""

    entry_module: str
    """Module each rank runs (`torchrun -m`)."""
    entry_args: list[str]
    """Arguments after the module."""
    nproc: int
    """Ranks on this node (`--nproc-per-node`)."""
    backend: str
    """nccl or gloo; recorded, and passed to the entry module by the caller."""
    timeout_s: float
    """One deadline for the whole job, from start to the last rank's exit."""
    env: dict[str, str]
    """Added to this process's environment for torchrun and the ranks; `{run_dir}` is substituted."""
    nnodes: str = "1"
    """`N` or `MIN:MAX`."""
    node_rank: int | None = None
    """This node's rank, given to the ranks as DDP_DOCTOR_NODE_RANK (c10d assigns its own)."""
    rdzv_endpoint: str | None = None
    """HOST:PORT of the c10d rendezvous; None with one node: --standalone."""
    rdzv_id: str | None = None
    master_port: int | None = None
    """One node: rendezvous on 127.0.0.1:PORT instead of a free port."""
    join_timeout_s: float | None = None
    """How long torchrun's rendezvous waits for every node (`--rdzv-conf join_timeout=`)."""
    keep_run_dir: bool = False
    """Keep the run directory (per-rank logs, payloads, stacks); RunOutcome.run_dir names it."""
    launcher: tuple[str, ...] | None = None
    """The torchrun command to use; None: find it (see `find_torchrun`)."""
    python: str | None = None
    """The target interpreter (env/target.py): its torchrun runs the ranks; None: the doctor's own."""


@dataclass
class RunOutcome:
    argv: list[str]
    returncode: int | None
    """torchrun's exit status; None when it never ran or the deadline ended it."""
    timed_out: bool
    duration_s: float
    ranks: dict[int, RankResult] = field(default_factory=dict)
    """rank -> its rank-N.json record."""
    heartbeats: dict[int, Heartbeat] = field(default_factory=dict)
    """rank -> its last heartbeat."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """A rank-N.json / rank-N.hb that is not a record of this ddp-doctor (cut short, foreign) -> why."""
    logs: dict[str, list[str]] = field(default_factory=dict)
    """torchrun.log, rank-N.log, <name>-rank-N.log -> last lines."""
    exit_codes: dict[str, int] = field(default_factory=dict)
    """"torchrun" and "rank N" -> return code as Python reports it (negative = signal)."""
    stacks: dict[int, str] = field(default_factory=dict)
    """rank -> faulthandler dump (stuck ranks, watchdog)."""
    error_files: dict[int, ErrorFile] = field(default_factory=dict)
    """rank -> torchelastic error file of an uncaught exception."""
    launcher_source: str = "path"
    """path | interpreter | module: how torchrun was found (module = python -m torch.distributed.run)."""
    preflight_error: str | None = None
    """Why the job was not started (e.g. the port is taken); None when it was."""
    run_dir: str | None = None
    """The kept run directory, or None when it was removed."""
    cleanup: Cleanup = field(default_factory=lambda: Cleanup(processes=0, shm=[]))
    """What the parent had to end or remove itself."""
    interrupted: bool = False


def find_torchrun(python: str | None = None) -> tuple[tuple[str, ...], str]:
    """The torchrun of the target interpreter `python`: the one on PATH when it runs that
    interpreter, else the one beside it, else `python -m torch.distributed.run`. Without a
    target, the torchrun on PATH whatever it runs (the doctor's own interpreter otherwise)."""

    on_path = shutil.which("torchrun")
    if on_path:
        runs = shebang_python(Path(on_path))
        if python is None or (runs is not None and same_environment(runs, python)):
            return (on_path,), "path"
    python = python or sys.executable
    beside = Path(python).with_name("torchrun")
    if beside.is_file() and os.access(beside, os.X_OK):
        return (str(beside),), "interpreter"
    return (python, "-m", "torch.distributed.run"), "module"


def _is_local(host: str) -> bool:
    return host in ("localhost", "127.0.0.1", "::1", "") or host == socket.gethostname()


def package_dir(run_dir: str | Path) -> str:
    """The directory that puts ddp_doctor (and nothing else) on the ranks' PYTHONPATH: the source
    tree of a checkout, or RUN_DIR/pkg holding a link to the installed package (made by launch())."""
    if Path(_SRC_DIR).name in ("site-packages", "dist-packages"):
        return os.path.join(str(run_dir), "pkg")
    return _SRC_DIR


def _link_package(run_dir: Path) -> None:
    pkg = Path(package_dir(run_dir))
    if pkg != Path(_SRC_DIR):
        pkg.mkdir(exist_ok=True)
        (pkg / "ddp_doctor").symlink_to(Path(_SRC_DIR, "ddp_doctor"))


def rank_tmp_dir(run_dir: str | Path) -> Path:
    """The ranks' TMPDIR: inside the run directory when AF_UNIX socket paths under it still fit
    (multiprocessing puts pymp-XXXXXXXX/listener-XXXXXXXX there, 107 bytes at most), else a short one in /tmp."""
    inside = Path(run_dir) / "tmp"
    return inside if len(str(inside)) <= UNIX_PATH_MAX - 40 else Path("/tmp") / f"{Path(run_dir).name}-tmp"


def build_command(spec: TorchrunSpec, run_dir: str | Path) -> tuple[list[str], dict[str, str]]:
    """The torchrun argv and the full environment for it; no side effects."""
    run_dir = str(run_dir)
    endpoint, rdzv_id, join_timeout_s = spec.rdzv_endpoint, spec.rdzv_id, None
    if spec.nnodes == "1" and endpoint is None:
        if spec.master_port is not None:  # one node on a port of the user's choosing, not --standalone's free one
            endpoint = f"127.0.0.1:{spec.master_port}"
            rdzv_id = rdzv_id or f"ddp-doctor-{uuid.uuid4().hex[:12]}"
    else:
        endpoint = endpoint or f"127.0.0.1:{spec.master_port or 29400}"
        rdzv_id, join_timeout_s = rdzv_id or "ddp-doctor", spec.join_timeout_s
    command = torchrun.TorchrunCommand(
        spec.entry_module,
        tuple(spec.entry_args),
        module=True,
        nproc=str(spec.nproc),
        nnodes=spec.nnodes,
        rdzv_endpoint=endpoint,
        rdzv_id=rdzv_id,
        join_timeout_s=join_timeout_s,
        max_restarts=0,
        monitor_interval_s=TORCHRUN_MONITOR_INTERVAL_S,
        log_dir=os.path.join(run_dir, "torchelastic"),
        launcher=spec.launcher or find_torchrun(spec.python)[0],
    )
    argv = torchrun.argv(command)

    env = dict(os.environ)
    env.update({k: v.replace("{run_dir}", run_dir) for k, v in spec.env.items()})
    env[layout.RUN_DIR_ENV] = run_dir
    env.setdefault(layout.NODE_ENV, socket.gethostname())
    if spec.node_rank is not None:
        env["DDP_DOCTOR_NODE_RANK"] = str(spec.node_rank)
    # torch's compiler caches default to /tmp/torchinductor_<user> (DDP() imports torch._dynamo): keep them in the run.
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(run_dir, "inductor"))
    env.setdefault("TRITON_CACHE_DIR", os.path.join(run_dir, "triton"))
    # Temp files of torchrun and the ranks (multiprocessing's pymp-*, torch's) go with the run directory,
    # even from a rank that torchrun ends with SIGTERM before its atexit handlers could remove them.
    if "TMPDIR" not in spec.env:
        env["TMPDIR"] = str(rank_tmp_dir(run_dir))
    env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default, set here to skip its banner
    env["PYTHONUNBUFFERED"] = "1"
    # The entry module must import in torchrun's interpreter even when that is another env.
    # Only the ddp_doctor package: an installed doctor's site-packages (rich, PyYAML, maybe numpy)
    # must not leak into the training environment the ranks are meant to test.
    src = package_dir(run_dir)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([src, *[p for p in parts if p != src]])
    return argv, env


# ---- the port ------------------------------------------------------------------------------


def _port_owner(port: int) -> str | None:
    """'pid 123 (python3)' of the process holding a TCP socket on port, when /proc tells."""
    inodes = {s.inode for s in procnet.tcp_sockets() if s.local_port == port}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                link = os.readlink(f"/proc/{entry}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    name = Path(f"/proc/{entry}/comm").read_text().strip()
                    return f"pid {entry} ({name})"
        except OSError:
            continue
    return None


def port_problem(port: int) -> str | None:
    """Why this node cannot serve the rendezvous on port, or None when it can."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As TCPStore binds: a port whose last connections are in TIME_WAIT (the previous job's store, a
        # minute ago) is free for it; a socket still listening there is not.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError as exc:
            owner = _port_owner(port)
            held = f" (held by {owner})" if owner else ""
            return f"TCP port {port} is not free on this host{held}: {exc.strerror or exc}"
    return None


# ---- running -------------------------------------------------------------------------------


def _ask_for_stacks(run_dir: Path, beats: dict[int, Heartbeat], done: set[int], tracked: dict[int, int]) -> None:
    """SIGUSR1 to each rank still running: its faulthandler writes rank-N.stack."""
    asked: list[Path] = []
    for r, beat in beats.items():
        pid = beat.pid
        if r in done or pid not in procs.alive(tracked):
            continue
        try:
            os.kill(pid, signal.SIGUSR1)
            asked.append(run_dir / f"rank-{r}.stack")
        except (ProcessLookupError, PermissionError):
            continue
    deadline = time.monotonic() + STACK_WAIT_S
    while asked and time.monotonic() < deadline:
        if all(p.exists() and p.stat().st_size > 0 for p in asked):
            time.sleep(0.1)  # let the dump finish
            break
        time.sleep(0.05)


def _preflight(spec: TorchrunSpec) -> str | None:
    """Why torchrun would fail at once (the port it must listen on is taken), or None."""
    if spec.master_port is not None and spec.rdzv_endpoint is None:
        return port_problem(spec.master_port)
    if spec.rdzv_endpoint and spec.node_rank in (0, None):
        host, _, port = spec.rdzv_endpoint.rpartition(":")
        if _is_local(host) and port.isdigit():
            return port_problem(int(port))
    return None


def _new_run_dir() -> Path:
    """A fresh run directory that names its owner, with the ranks' TMPDIR and the package's link in it."""
    for stale in owner.sweep(RUN_DIR_PREFIX):  # left by a doctor that was killed (SIGKILL, the OOM killer)
        shutil.rmtree(rank_tmp_dir(stale), ignore_errors=True)
    run_dir = owner.make_dir(RUN_DIR_PREFIX)
    rank_tmp_dir(run_dir).mkdir(mode=0o700)  # the ranks' TMPDIR (build_command); removed in _finish
    _link_package(run_dir)
    return run_dir


def _wait(
    proc: subprocess.Popen[bytes],
    deadline: float,
    tracked: dict[int, int],
    run_dir: Path,
    on_poll: Callable[[dict[int, Heartbeat]], None] | None,
) -> bool:
    """Until torchrun exits (False) or the deadline passes (True), tracking its descendants on the way."""
    last_scan = 0.0
    exited = _exit_waiter(proc.pid)
    try:
        while True:
            now = time.monotonic()
            if now - last_scan > 0.25:
                tracked.update(procs.descendants(proc.pid, tracked))
                last_scan = now
                if on_poll is not None:
                    on_poll(reader.read_heartbeats(run_dir))
            if proc.poll() is not None:
                return False
            if now >= deadline:
                return True
            exited(min(POLL_S, max(0.0, deadline - now)))
    finally:
        exited.close()


def launch(spec: TorchrunSpec, on_poll: Callable[[dict[int, Heartbeat]], None] | None = None) -> RunOutcome:
    """Run the job; `on_poll`, when given, hears the ranks' latest heartbeats a few times a second."""
    started = time.monotonic()
    deadline = started + spec.timeout_s
    run_dir = _new_run_dir()
    launcher, source = (spec.launcher, "given") if spec.launcher else find_torchrun(spec.python)
    spec_with_launcher = spec if spec.launcher else _with_launcher(spec, launcher)
    argv, env = build_command(spec_with_launcher, run_dir)
    outcome = RunOutcome(argv=argv, returncode=None, timed_out=False, duration_s=0.0, launcher_source=source)
    shm_before = procs.shm_entries()
    tracked: dict[int, int] = {}
    proc: subprocess.Popen[bytes] | None = None
    old_handler = None
    if threading.current_thread() is threading.main_thread():
        old_handler = signal.signal(signal.SIGTERM, proc_mod.on_terminate)
    try:
        outcome.preflight_error = _preflight(spec)
        if outcome.preflight_error:
            return outcome
        if shutil.which(argv[0], path=env.get("PATH")) is None:
            outcome.preflight_error = f"cannot start {argv[0]}: not found, or not an executable file"
            return outcome
        with open(run_dir / "torchrun.log", "wb") as log:
            try:
                proc = subprocess.Popen(
                    proc_mod.dying_with_us(argv),  # torchrun's own session: a SIGKILLed doctor cannot end it
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                outcome.preflight_error = f"cannot start {argv[0]}: {exc.strerror or exc}"
                return outcome
        outcome.timed_out = _wait(proc, deadline, tracked, run_dir, on_poll)
        outcome.returncode = proc.returncode
        if outcome.timed_out:
            tracked.update(procs.descendants(proc.pid, tracked))
            beats = reader.read_heartbeats(run_dir)
            done = {r for r, res in reader.results(run_dir).records.items() if res.finished}
            _ask_for_stacks(run_dir, beats, done, tracked)
    except KeyboardInterrupt:
        outcome.interrupted = True
        raise
    finally:
        # A second Ctrl-C during the cleanup must not leave half of it undone: hold signals until it is over.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            _finish(outcome, spec, proc, tracked, run_dir, shm_before, started)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            if old_handler is not None:
                signal.signal(signal.SIGTERM, old_handler)
    return outcome


class _ExitWaiter:
    """Sleeps until a timeout or the child's exit, whichever is first: with a pidfd (Linux 5.3+) the
    verdict does not wait out the rest of a poll interval after torchrun exits; else a plain sleep."""

    def __init__(self, fd: int | None):
        self.fd = fd
        self.poller = select.poll()
        if fd is not None:
            self.poller.register(fd, select.POLLIN)

    def __call__(self, timeout_s: float) -> None:
        if self.fd is None:
            time.sleep(timeout_s)
        else:
            self.poller.poll(timeout_s * 1000)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _exit_waiter(pid: int) -> _ExitWaiter:
    try:
        return _ExitWaiter(os.pidfd_open(pid))
    except (AttributeError, OSError):  # older Python or kernel, or a seccomp filter that refuses it
        return _ExitWaiter(None)


def _with_launcher(spec: TorchrunSpec, launcher: tuple[str, ...]) -> TorchrunSpec:
    return replace(spec, launcher=launcher)


def _finish(
    outcome: RunOutcome,
    spec: TorchrunSpec,
    proc: subprocess.Popen[bytes] | None,
    tracked: dict[int, int],
    run_dir: Path,
    shm_before: set[str],
    started: float,
) -> None:
    """End whatever is left, read the run's files, remove what it made. Runs on every path out."""
    ended = 0
    if proc is not None:
        # Also after torchrun's exit: a rank's children whose rank was killed are found by their session.
        tracked.update(procs.descendants(proc.pid, tracked))
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
            ended += 1
        ended += procs.end_all(tracked, GRACE_S)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            pass
    beats, results = reader.heartbeats(run_dir), reader.results(run_dir)
    outcome.heartbeats = beats.records
    outcome.ranks = results.records
    outcome.unreadable = {**beats.unreadable, **results.unreadable}
    outcome.error_files = reader.read_error_files(run_dir)
    outcome.stacks = reader.read_stacks(run_dir)
    pid_rank = {b.pid: r for r, b in beats.records.items()}
    pid_rank.update({res.pid: r for r, res in results.records.items()})
    outcome.logs = tails(run_dir, LOG_TAIL_LINES, pid_rank=pid_rank)
    codes = parse_exit_codes("\n".join(outcome.logs.get("torchrun.log", [])))
    if proc is not None and outcome.returncode is not None:
        codes["torchrun"] = outcome.returncode
    outcome.exit_codes = codes
    pids = set(tracked) | set(pid_rank)
    outcome.cleanup = Cleanup(processes=ended, shm=procs.remove_new_shm(shm_before, pids))
    outcome.duration_s = round(time.monotonic() - started, 3)
    if spec.keep_run_dir:
        outcome.run_dir = str(run_dir)
        owner.disown(run_dir)  # the user's now: never swept
    else:
        shutil.rmtree(run_dir, ignore_errors=True)
    shutil.rmtree(rank_tmp_dir(run_dir), ignore_errors=True)  # nothing in it is worth keeping
