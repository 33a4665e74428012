"""ddp-doctor's startup hook, imported by every Python process of a job under `ddp-doctor run`.

`ddp-doctor run` prepends this directory to PYTHONPATH, so Python imports this module at start-up
(site.py imports `sitecustomize`). It changes nothing the user's program can see except that
sys.stdout / sys.stderr become tees that also append to a file in the run directory. It must:
- import nothing beyond the standard library (the job's interpreter may lack ddp_doctor),
- cost nothing measurable (a few syscalls at start, one extra write per print),
- never raise: a broken hook must not break the user's job,
- chain to the sitecustomize it shadows, so the user's own one still runs.

What it adds in a process that is a rank (RANK set, or the lone process of `python train.py`):
- a faulthandler on SIGURG that dumps every thread's stack into rank-N.stack,
- an excepthook that writes a torchelastic-style error file (what @record would have written),
- rank-N.pid (who it is) and rank-N.exit (how it ended, when Python still ran its atexit handlers),
- a daemon thread that writes the rank's heartbeat (each process group's collective sequence number,
  hb-rank-N.json, `ddp_doctor_heartbeat`), dumps the flight recorder when the doctor asks (a request file), and
  writes the main thread's stack when the doctor asks for one (stack.request -> rank-N.sample).
Stacks are read by that thread (`sys._current_frames()`, under the GIL), not by a signal: faulthandler's dump from
a signal handler walks frames while the interrupted thread may be half-way through making one, and on CPython
3.11 a SIGURG every few ms during torch's imports segfaulted 4 of 17 runs; SIGURG stays the last resort for a
rank whose thread cannot run (one that holds the GIL in C code).
In other processes of the job (torchrun's agent, DataLoader workers) it only tees the output.
"""

# The job's interpreter may be older than ddp-doctor's own: annotations stay unevaluated (`tuple[...]`, `X | None`).
from __future__ import annotations

import os
import sys


# The hook is split into module-level steps: each uses only this module's own globals (os, sys), which the
# functions keep alive after _chain puts the user's module in sys.modules["sitecustomize"].
def _ddp_doctor_hook() -> None:
    run_dir = os.environ.get("DDP_DOCTOR_WATCH_DIR")
    if not run_dir or not os.path.isdir(run_dir):
        return
    rank, is_rank = _claim_rank()
    name = f"rank-{rank}" if is_rank else f"proc-{os.getpid()}"
    if os.environ.get("DDP_DOCTOR_WATCH_TEE", "1") == "1":
        _tee_output(os.path.join(run_dir, name + ".log"))
    if not is_rank:
        return
    _write_pid(run_dir, name, rank)
    if os.environ.get("DDP_DOCTOR_WATCH_STACKS", "1") == "1":
        _stacks_on_sigurg(os.path.join(run_dir, name + ".stack"))
    _record_the_end(run_dir, name)
    _serve_dump_requests(
        run_dir,
        rank,
        os.environ.get("DDP_DOCTOR_WATCH_FR") == "1",
        os.environ.get("DDP_DOCTOR_WATCH_STACKS", "1") == "1",
    )


def _claim_rank() -> tuple[int, bool]:
    """(rank, whether this process is that rank). A DataLoader worker or a subprocess of a rank inherits
    RANK: the first process to claim it is the rank."""
    marker = "DDP_DOCTOR_WATCH_RANK_PID"
    rank_env = os.environ.get("RANK")
    lone = os.environ.get("DDP_DOCTOR_WATCH_LONE") == "1"
    is_rank = os.environ.get(marker) is None and (rank_env is not None or lone)
    if is_rank:
        os.environ[marker] = str(os.getpid())
    return (int(rank_env) if rank_env and rank_env.isdigit() else 0), is_rank


def _tee_output(path: str) -> None:
    """sys.stdout / sys.stderr become tees that also append to `path`."""
    from typing import Any

    log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)

    class _Tee:
        """The original stream, plus a copy of every write into the run directory."""

        _stream: Any

        def __init__(self, stream: Any) -> None:
            self.__dict__["_stream"] = stream

        def write(self, text: str) -> int:
            n: int = self._stream.write(text)
            try:
                os.write(log_fd, text.encode("utf-8", "replace"))
            except (OSError, AttributeError, TypeError):
                pass
            return n

        def writelines(self, lines: object) -> None:
            for line in lines:  # type: ignore[attr-defined]
                self.write(line)

        def __getattr__(self, attr: str) -> object:
            return getattr(self._stream, attr)

        def __setattr__(self, attr: str, value: object) -> None:
            setattr(self._stream, attr, value)

    for stream_name in ("stdout", "stderr"):
        stream = getattr(sys, stream_name, None)
        if stream is not None:
            setattr(sys, stream_name, _Tee(stream))


def _write_pid(run_dir: str, name: str, rank: int) -> None:
    import time

    import ddp_doctor_rankfiles as rankfiles  # beside this file: the record the doctor reads back

    world = os.environ.get("WORLD_SIZE", "")
    record = rankfiles.RankPid(
        rank, os.getpid(), tuple(sys.argv[:8]), time.time(), int(world) if world.isdigit() else None
    )
    rankfiles.write(run_dir, name, "pid", record)


def _stacks_on_sigurg(path: str) -> None:
    import faulthandler
    import signal

    stack_file = open(path, "a")  # noqa: SIM115 - lives with the process (faulthandler holds it)
    # SIGURG: its default action is to ignore it, so a signal that arrives after faulthandler let go at
    # interpreter exit (or before this hook ran) cannot kill the rank.
    faulthandler.register(signal.SIGURG, file=stack_file, all_threads=True, chain=False)


def _record_the_end(run_dir: str, name: str) -> None:
    """An uncaught exception -> NAME.error.json, torchelastic's error file and NAME.exit; a normal exit -> NAME.exit."""
    import atexit
    import json
    import time

    import ddp_doctor_rankfiles as rankfiles

    def _write_exit(kind: str, detail: str | None) -> None:
        try:
            rankfiles.write(run_dir, name, "exit", rankfiles.RankExit(kind, detail, time.time()))
        except OSError:
            pass

    previous_hook = sys.excepthook

    def _excepthook(etype, value, tb):  # type: ignore[no-untyped-def]
        try:
            import traceback

            text = "".join(traceback.format_exception(etype, value, tb))
            record = {
                "message": {
                    "message": f"{etype.__name__}: {value}",
                    "extraInfo": {"py_callstack": text, "timestamp": str(int(time.time()))},
                }
            }
            with open(os.path.join(run_dir, name + ".error.json"), "w") as f:
                json.dump(record, f)
            target = os.environ.get("TORCHELASTIC_ERROR_FILE")
            # torchrun reads this file for its failure summary; @record would have written it. Never overwrite.
            if target and os.environ.get("DDP_DOCTOR_WATCH_ERROR_FILE", "1") == "1" and not os.path.exists(target):
                with open(target, "w") as f:
                    json.dump(record, f)
            _write_exit("exception", f"{etype.__name__}: {value}")
        except Exception:  # noqa: BLE001, S110 - the user's traceback must still be printed
            pass
        previous_hook(etype, value, tb)

    sys.excepthook = _excepthook

    def _at_exit() -> None:
        if not os.path.exists(os.path.join(run_dir, name + ".exit")):
            _write_exit("exit", None)

    atexit.register(_at_exit)


def _serve_dump_requests(run_dir: str, rank: int, want_fr: bool, want_stacks: bool) -> None:
    import threading
    import time
    from typing import Any

    request = os.path.join(run_dir, "dump.request")
    main_ident = threading.main_thread().ident

    def _heartbeat_and_dumps() -> None:
        # Four times a second: the heartbeat (each process group's collective sequence number, written when it
        # moved) and the doctor's request file (touched on a suspected hang: every rank then writes a fresh
        # heartbeat and, unless switched off, its flight-recorder dump). A few attribute reads and, when a
        # number moved, one small file: nothing a step notices.
        try:
            import ddp_doctor_heartbeat as heartbeat
        except ImportError:  # the hook's directory left sys.path: no heartbeat, no dumps, no stacks
            return
        state = _TickState()
        while True:
            time.sleep(HEARTBEAT_S)
            try:
                if want_stacks:
                    state.stack_seen = _answer_stack_request(heartbeat, run_dir, rank, main_ident, state.stack_seen)
                _tick(heartbeat, state)
            except Exception:  # noqa: BLE001, S110 - a failed tick (a full disk, a file removed) must not end the thread
                pass

    class _TickState:
        seen = 0.0
        """The request file's mtime last served."""
        last: Any = None
        """The groups of the heartbeat last written."""
        stack_seen = 0.0
        """The stack request file's mtime last answered."""

    def _tick(heartbeat: Any, state: _TickState) -> None:
        try:
            mtime = os.stat(request).st_mtime
        except OSError:
            mtime = 0.0
        asked = mtime > state.seen
        state.seen = max(state.seen, mtime)
        dist = sys.modules.get("torch.distributed")
        beat = None if dist is None else heartbeat.of_this_process(dist, rank, os.getpid(), time.time())
        if beat is None:
            return
        if asked or beat.groups != state.last:
            state.last = beat.groups
            heartbeat.write(run_dir, beat)
        if asked and want_fr:
            data, ext = _fr_trace()
            if data:
                _write_atomic(
                    os.path.join(run_dir, f"fr-rank-{rank}.{ext}"), data.encode() if isinstance(data, str) else data
                )

    threading.Thread(target=_heartbeat_and_dumps, name="ddp-doctor-heartbeat", daemon=True).start()


HEARTBEAT_S = 0.25
"""How often a rank looks at its sequence numbers and at the doctor's request files."""


def _answer_stack_request(heartbeat: object, run_dir: str, rank: int, main_ident: int | None, seen: float) -> float:
    """Write the main thread's stack if the doctor asked since `seen` (the request file's mtime); the new `seen`.
    Before init_process_group too: where a rank is during imports and compilation is what the doctor asks."""
    stack_request = os.path.join(run_dir, heartbeat.STACK_REQUEST)  # type: ignore[attr-defined]
    try:
        mtime = os.stat(stack_request).st_mtime
    except OSError:
        return seen
    if mtime <= seen:
        return seen
    with open(stack_request) as f:
        token = f.read(64).strip()
    frame = sys._current_frames().get(main_ident) if main_ident is not None else None
    text = heartbeat.stack_text(token, main_ident, frame)  # type: ignore[attr-defined]
    _write_atomic(heartbeat.sample_path(run_dir, rank), text.encode())  # type: ignore[attr-defined]
    return mtime


def _fr_trace() -> tuple[bytes | str | None, str]:
    """(the flight recorder's dump, its file extension); (None, "json") when this torch has none."""
    try:
        c10d = sys.modules["torch"]._C._distributed_c10d
        if hasattr(c10d, "_dump_fr_trace_json"):
            return c10d._dump_fr_trace_json(True, False), "json"
        if hasattr(c10d, "_dump_nccl_trace_json"):
            return c10d._dump_nccl_trace_json(True, False), "json"
        if hasattr(c10d, "_dump_nccl_trace"):
            return c10d._dump_nccl_trace(), "pickle"
    except Exception:  # noqa: BLE001, S110 - no recorder in this torch / this process group
        pass
    return None, "json"


def _write_atomic(target: str, data: bytes) -> None:
    with open(target + ".tmp", "wb") as f:
        f.write(data)
    os.replace(target + ".tmp", target)


def _chain() -> None:
    """Import the sitecustomize this module shadows (the user's or the distribution's), if any."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = None
    try:
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec("sitecustomize", rest)
    except Exception:  # noqa: BLE001
        return
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _ddp_doctor_hook()
except Exception:  # noqa: BLE001, S110 - never break the user's job
    pass
_chain()
