"""The torchrun entry point of the live chain: runs the phases, one rank per process.

Started only through `ddp_doctor.live.launch` (torchrun -m ddp_doctor.live.worker ...). It
refuses to run outside torchrun, so the classic mistake of one process calling
`init_process_group(rank=0, world_size=2)` and waiting forever cannot happen through the tool.

Per rank, in the run directory: rank-N.log (its stdout+stderr), rank-N.hb (heartbeat),
rank-N.json (results, rewritten after every phase), rank-N.stack (faulthandler dumps),
rank-N.error.json (torchelastic error file of an uncaught exception).
"""

from __future__ import annotations

import atexit
import ctypes
import faulthandler
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NoReturn, TextIO

from ddp_doctor.live import faults as faults_mod
from ddp_doctor.live import rankconfig
from ddp_doctor.live.multinode import rankside
from ddp_doctor.live.phases import PhaseContext, Shared, load
from ddp_doctor.live.rankconfig import RankConfig
from ddp_doctor.rundir import layout, reader, writer
from ddp_doctor.rundir.records import CheckRecord, Heartbeat, PhaseErrorRecord, PhaseRecord, RankResult, RecordError

PHASES = ("init", "collectives", "dataloader", "sampler", "ddp", "balance")
# Each phase's share of the overall timeout: its own deadline, enforced by the watchdog.
# init is the largest because it includes waiting for the slowest rank's torch import.
BUDGET_SHARE = {
    "init": 0.4,
    "collectives": 0.2,
    "dataloader": 0.25,
    "sampler": 0.1,
    "ddp": 0.3,
    "balance": 0.15,
    "gpu_health": 0.3,
}
# The ranks give up this long before the parent's deadline, so they report before being ended.
MARGIN_S = 2.0
EXIT_STUCK = 124
REQUIRED_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
)


def config_from_argv(argv: Sequence[str]) -> RankConfig:
    """The parent's record (`--config JSON`, live/rankconfig.py); ValueError on any other argv."""
    if len(argv) != 2 or argv[0] != rankconfig.FLAG:
        raise ValueError(f"expected `{rankconfig.FLAG} JSON` (written by live/chain.py), got {list(argv)[:4]}")
    return RankConfig.from_json(argv[1])


class RankState:
    """What this rank reports, as it goes: its phases as typed records and the phases' outputs (`body`,
    the JSON the parent reads as the live chain's: torch facts, device, ddp...). The main thread and the
    watchdog both write it; `write` replaces rank-N.json atomically."""

    def __init__(self, rank: int, node: str | None, body: dict[str, Any]):
        self.rank = rank
        self.node = node
        self.body = body
        self.phases: list[PhaseRecord] = []
        self.finished = False
        self.teardown_stuck = False

    def phase(self, name: str) -> PhaseRecord:
        return next((p for p in self.phases if p.name == name), PhaseRecord(name, "running"))

    def put(self, record: PhaseRecord) -> None:
        """Replace the phase of that name, or add it after the others."""
        at = next((i for i, p in enumerate(self.phases) if p.name == record.name), len(self.phases))
        self.phases[at : at + 1] = [record]

    def result(self) -> RankResult:
        return RankResult(
            rank=self.rank,
            pid=os.getpid(),
            finished=self.finished,
            node=self.node,
            teardown_stuck=self.teardown_stuck,
            phases=tuple(self.phases),
            body=self.body,
        )

    def write(self) -> None:
        writer.write_result(self.result())


class Context:
    """What every phase gets: who this rank is, its device, its deadline, and what earlier phases left."""

    def __init__(self, config: RankConfig, state: RankState, faults: list[faults_mod.Fault]):
        self.config = config
        self.backend: str = config.backend
        self.rank = int(os.environ["RANK"])
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        self.local_world_size = int(os.environ["LOCAL_WORLD_SIZE"])
        self.node = os.environ.get(layout.NODE_ENV) or socket.gethostname()
        self.state = state
        self.payload = state.body  # what a phase reports besides its checks, under the phase's own key
        self.faults = faults
        self.phase = "start"
        self.phase_deadline = float("inf")
        self.deadline: float = config.deadline or (time.time() + config.timeout)
        self.device: Any = None  # torch.device once init has set it
        self.shared = Shared()

    def step(self, name: str) -> None:
        writer.heartbeat(self.phase, name)

    def remaining(self) -> float:
        """Seconds left in this phase."""
        return max(0.1, self.phase_deadline - time.time())


class Watchdog(threading.Thread):
    """Ends this rank when a phase overruns its deadline, leaving the stacks and a result behind."""

    def __init__(self, ctx: Context, stack_file: TextIO):
        super().__init__(name="ddp-doctor-watchdog", daemon=True)
        self.ctx = ctx
        self.stack_file = stack_file

    def run(self) -> None:
        while True:
            time.sleep(0.1)
            if time.time() >= self.ctx.phase_deadline:
                self._end(self.ctx)

    def _end(self, ctx: Context) -> NoReturn:
        """The phase overran: its stacks and a stuck record written, the rank ends."""
        if ctx.phase == "done":  # every phase reported; only the teardown hangs (NCCL can)
            ctx.state.finished = ctx.state.teardown_stuck = True
            ctx.state.write()
            os._exit(0)
        self.stack_file.write(f"--- watchdog: phase {ctx.phase} overran its deadline ---\n")
        self.stack_file.flush()
        faulthandler.dump_traceback(file=self.stack_file, all_threads=True)
        self.stack_file.flush()
        record = ctx.state.phase(ctx.phase)
        now = time.time()
        message = f"rank {ctx.rank} was still in phase {ctx.phase} after its {record.budget_s} s deadline"
        ctx.state.put(
            replace(
                record,
                status="fail",
                kind="stuck",
                failed_at=now,
                duration_s=round(now - (record.started or now), 3),
                error=PhaseErrorRecord("PhaseTimeout", message, step=_last_step()),
            )
        )
        ctx.state.write()
        os._exit(EXIT_STUCK)


def _last_step() -> str | None:
    try:
        return Heartbeat.from_json(writer.path("hb").read_text()).step
    except (OSError, RecordError):
        return None


def redirect_output(rank: int) -> None:
    """stdout+stderr (including C libraries, NCCL) into rank-N.log, so logs are never interleaved."""
    fd = os.open(writer.path("log", rank), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def die_with_parent() -> None:
    """PR_SET_PDEATHSIG: if torchrun dies, so does this rank (it runs in its own session)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def check_launched_by_torchrun() -> str | None:
    missing = [k for k in REQUIRED_ENV if k not in os.environ]
    if missing or layout.RUN_DIR_ENV not in os.environ:
        return (
            "ddp_doctor.live.worker must be started by `ddp-doctor check` (torchrun); missing "
            + ", ".join(missing or [layout.RUN_DIR_ENV])
            + ". One process calling init_process_group(rank=0, "
            "world_size=2) would wait forever for a rank that nobody starts."
        )
    return None


def _ask_for_stacks(ranks: list[int]) -> None:
    """Before giving up on peers, have them dump their stacks (same node: their heartbeat names the pid),
    since torchrun ends them as soon as this rank exits."""
    beats = reader.read_heartbeats(writer.run_dir())
    asked = False
    for r in ranks:
        beat = beats.get(r)
        pid = beat.pid if beat else 0
        if pid > 0:
            try:
                os.kill(pid, signal.SIGUSR1)
                asked = True
            except (ProcessLookupError, PermissionError):
                continue
    if asked:
        time.sleep(0.5)


def _budget(ctx: Context, name: str) -> float:
    share = BUDGET_SHARE.get(name, 0.2) * ctx.config.timeout
    if name == "init" and ctx.config.init_timeout:
        share = ctx.config.init_timeout
    return float(max(1.0, min(share, ctx.deadline - MARGIN_S - time.time())))


def _prewarm() -> threading.Thread:
    """DDP() imports torch._dynamo (about a second); do it while this rank waits for its peers."""

    def work() -> None:
        try:
            import torch._dynamo  # noqa: F401
        except Exception:  # noqa: BLE001, S110 - the ddp phase will meet the same error and report it
            pass

    thread = threading.Thread(target=work, name="ddp-doctor-prewarm", daemon=True)
    thread.start()
    return thread


def _start(config: RankConfig) -> RankState:
    """This rank's state before its first phase: who it is, in the body the parent reads."""
    rank = int(os.environ["RANK"])
    body: dict[str, Any] = {
        "cpu_at_start_s": round(time.process_time(), 3),
        "node_rank": os.environ.get("DDP_DOCTOR_NODE_RANK", os.environ.get("GROUP_RANK")),
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "world_size": int(os.environ["WORLD_SIZE"]),
        "backend": config.backend,
    }
    return RankState(rank, os.environ.get(layout.NODE_ENV), body)


def _error_record(exc: Exception) -> PhaseErrorRecord:
    """A phase's exception as the parent reads it; a phase that understands its failure says more
    (PhaseError: cause and remedy; PeerError: the ranks it waited for)."""
    blame = getattr(exc, "blame_ranks", None)
    return PhaseErrorRecord(
        type=type(exc).__name__,
        message=str(exc)[:4000],
        traceback=traceback.format_exc()[-8000:],
        blame_ranks=tuple(blame) if blame is not None else None,
        step=_last_step(),
        cause=getattr(exc, "cause", None),
        remedy=getattr(exc, "remedy", None),
    )


def _run_phase(ctx: Context, name: str, stack_file: TextIO) -> bool | None:
    """One phase under its deadline: True when its checks passed, False when one failed, None when it
    raised (the chain stops there). Its record is written either way."""
    ctx.phase = name
    budget = _budget(ctx, name)
    started = time.time()
    cpu_started = time.process_time()
    ctx.phase_deadline = started + budget
    record = replace(ctx.state.phase(name), started=started, budget_s=round(budget, 1), status="running")
    ctx.state.put(record)
    writer.heartbeat(name, deadline=ctx.phase_deadline)
    # A C-level hang that holds the GIL would stop the watchdog thread; this C timer still fires.
    faulthandler.dump_traceback_later(budget + 3.0, exit=True, file=stack_file)
    try:
        faults_mod.trigger(ctx.faults, ctx.rank, name)
        run: Callable[[PhaseContext], list[CheckRecord]] = load(name).run  # mypy holds Context to PhaseContext
        checks = run(ctx)
    except Exception as exc:  # noqa: BLE001 - a phase's failure is data for the report, not a crash of the worker
        error = _error_record(exc)
        ctx.phase_deadline = float("inf")
        faulthandler.cancel_dump_traceback_later()
        now = time.time()
        ctx.state.put(
            replace(record, status="fail", kind="error", failed_at=now, duration_s=round(now - started, 3), error=error)
        )
        ctx.state.write()
        _ask_for_stacks(list(error.blame_ranks or ()))
        return None
    ctx.phase_deadline = float("inf")
    faulthandler.cancel_dump_traceback_later()
    failed = any(c.failed for c in checks)
    now = time.time()
    record = replace(
        record,
        status="fail" if failed else "pass",
        kind="check" if failed else None,
        failed_at=now if failed else None,
        duration_s=round(now - started, 3),
        cpu_s=round(time.process_time() - cpu_started, 3),  # all threads of the rank, this phase
        checks=tuple(checks),
    )
    ctx.state.put(record)
    ctx.state.write()
    return not failed


def _finish(ctx: Context, ok: bool) -> None:
    """After the phases: a multi-node rank's cluster step, then the process group's teardown, under a
    deadline the watchdog keeps (a teardown that hangs is reported, not waited for)."""
    # A rank of a multi-node check (its node set the cluster file): cross-node probes, then every
    # rank's result to node 0 (live/multinode/rankside.py).
    if os.environ.get("DDP_DOCTOR_CLUSTER_FILE"):
        ctx.phase, ctx.phase_deadline = "cluster", ctx.deadline - MARGIN_S / 2
        rankside.finish(ctx.state.result(), ok, ctx.phase_deadline - 1.0)
        ctx.phase_deadline = float("inf")
    writer.heartbeat("done")
    ctx.phase = "done"
    ctx.phase_deadline = time.time() + MARGIN_S + 5.0
    try:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001, S110 - teardown of a failed group must not hide the phase results
        pass
    ctx.state.finished = True
    ctx.state.write()


def run_phases(config: RankConfig, stack_file: TextIO) -> int:
    faults = faults_mod.parse(os.environ.get(faults_mod.ENV))
    ctx = Context(config, _start(config), faults)
    Watchdog(ctx, stack_file).start()
    phases = list(config.phases)
    if "ddp" in phases and not os.environ.get("DDP_DOCTOR_NO_PREWARM"):
        ctx.shared.prewarm = _prewarm()
    ok = True
    for name in phases:
        passed = _run_phase(ctx, name, stack_file)
        ok = ok and bool(passed)
        if passed is None:
            break
    _finish(ctx, ok)
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    problem = check_launched_by_torchrun()
    if problem:
        print(f"ddp-doctor worker: {problem}", file=sys.stderr)
        return 2
    try:
        config = config_from_argv(sys.argv[1:] if argv is None else argv)
    except ValueError as exc:
        print(f"ddp-doctor worker: {exc}", file=sys.stderr)
        return 2
    rank = int(os.environ["RANK"])
    redirect_output(rank)
    die_with_parent()
    faults = faults_mod.parse(os.environ.get(faults_mod.ENV))
    faults_mod.trigger(faults, rank, "start")  # never_start: before the first heartbeat
    # Registered before the first heartbeat: whoever reads a pid from it may ask for a stack.
    stack_file = open(writer.path("stack"), "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the rank
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    writer.heartbeat("start")
    os.environ["TORCHELASTIC_ERROR_FILE"] = str(writer.path("error.json"))
    from torch.distributed.elastic.multiprocessing.errors import record

    return int(record(run_phases)(config, stack_file) or 0)


if __name__ == "__main__":
    code = main()
    # Every result is written (atomically) by now. Finalising an interpreter that holds torch and
    # torch._dynamo tears down thousands of modules: 0.6-1 s of CPU per rank, most of the time between
    # the last phase and torchrun's exit on a small machine. The atexit handlers still run (8 ms; e.g.
    # multiprocessing removes its pymp-* temp dir); only the module teardown is skipped.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
