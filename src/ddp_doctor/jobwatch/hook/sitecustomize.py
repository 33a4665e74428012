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
- a daemon thread that dumps the NCCL flight recorder when the doctor asks (a request file).
In other processes of the job (torchrun's agent, DataLoader workers) it only tees the output.
"""

import os
import sys


def _ddp_doctor_hook() -> None:  # noqa: C901 - a startup hook that must be one self-contained function in the rank (issue 19 owns it)
    run_dir = os.environ.get("DDP_DOCTOR_WATCH_DIR")
    if not run_dir or not os.path.isdir(run_dir):
        return
    import faulthandler
    import json
    import signal
    import threading
    import time
    from typing import Any

    marker = "DDP_DOCTOR_WATCH_RANK_PID"
    rank_env = os.environ.get("RANK")
    lone = os.environ.get("DDP_DOCTOR_WATCH_LONE") == "1"
    claimed = os.environ.get(marker)
    # A DataLoader worker or a subprocess of a rank inherits RANK: the first process to claim it is the rank.
    is_rank = claimed is None and (rank_env is not None or lone)
    rank = int(rank_env) if rank_env and rank_env.isdigit() else 0
    if is_rank:
        os.environ[marker] = str(os.getpid())
        name = f"rank-{rank}"
    else:
        name = f"proc-{os.getpid()}"

    def _open(path: str) -> int:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)

    if os.environ.get("DDP_DOCTOR_WATCH_TEE", "1") == "1":
        log_fd = _open(os.path.join(run_dir, name + ".log"))

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

    if not is_rank:
        return

    info = {"rank": rank, "pid": os.getpid(), "argv": sys.argv[:8], "time": time.time()}
    with open(os.path.join(run_dir, name + ".pid.tmp"), "w") as f:
        json.dump(info, f)
    os.replace(os.path.join(run_dir, name + ".pid.tmp"), os.path.join(run_dir, name + ".pid"))

    if os.environ.get("DDP_DOCTOR_WATCH_STACKS", "1") == "1":
        stack_file = open(os.path.join(run_dir, name + ".stack"), "a")  # noqa: SIM115 - lives with the process
        # SIGURG: its default action is to ignore it, so a signal that arrives after faulthandler let go at
        # interpreter exit (or before this hook ran) cannot kill the rank.
        faulthandler.register(signal.SIGURG, file=stack_file, all_threads=True, chain=False)

    def _write_exit(kind: str, detail: object) -> None:
        try:
            with open(os.path.join(run_dir, name + ".exit"), "w") as f:
                json.dump({"kind": kind, "detail": detail, "time": time.time()}, f)
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

    import atexit

    def _at_exit() -> None:
        if not os.path.exists(os.path.join(run_dir, name + ".exit")):
            _write_exit("exit", None)

    atexit.register(_at_exit)

    request = os.path.join(run_dir, "dump.request")

    def _write(target: str, data: bytes) -> None:
        with open(target + ".tmp", "wb") as f:
            f.write(data)
        os.replace(target + ".tmp", target)

    want_fr = os.environ.get("DDP_DOCTOR_WATCH_FR") == "1"

    def _dump_on_request() -> None:
        # Poll one file's mtime per second: the doctor touches it on a suspected hang. Every rank then writes
        # its process group's collective sequence number (a counter torch keeps for gloo and NCCL whether or not
        # the flight recorder records: the cheap progress signal) and, unless switched off, a recorder dump.
        seen = 0.0
        while True:
            time.sleep(1.0)
            try:
                mtime = os.stat(request).st_mtime
            except OSError:
                continue
            if mtime <= seen:
                continue
            seen = mtime
            dist = sys.modules.get("torch.distributed")
            data, ext = None, "json"
            try:
                if dist is None or not dist.is_initialized():
                    continue
                pg = dist.distributed_c10d._get_default_group()
                seq = {"seq": int(pg._get_sequence_number_for_group()), "backend": str(dist.get_backend())}
                _write(os.path.join(run_dir, f"seq-rank-{rank}.json"), json.dumps(seq).encode())
            except Exception:  # noqa: BLE001, S110 - no sequence number in this torch / process group
                pass
            if not want_fr:
                continue
            try:
                c10d = sys.modules["torch"]._C._distributed_c10d
                if hasattr(c10d, "_dump_fr_trace_json"):
                    data = c10d._dump_fr_trace_json(True, False)
                elif hasattr(c10d, "_dump_nccl_trace_json"):
                    data = c10d._dump_nccl_trace_json(True, False)
                elif hasattr(c10d, "_dump_nccl_trace"):
                    data, ext = c10d._dump_nccl_trace(), "pickle"
            except Exception:  # noqa: BLE001 - no recorder in this torch / this process group
                data = None
            if data:
                _write(os.path.join(run_dir, f"fr-rank-{rank}.{ext}"), data.encode() if isinstance(data, str) else data)

    threading.Thread(target=_dump_on_request, name="ddp-doctor-fr", daemon=True).start()


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
