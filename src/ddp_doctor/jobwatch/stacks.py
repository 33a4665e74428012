"""Python stacks of the ranks: captured by py-spy or the hook's faulthandler, parsed, classified.

A stack is classified by what its main thread is doing, innermost frame first:
collective (waiting in torch.distributed), backward (autograd; DDP's all-reduce waits here),
cuda (a CUDA synchronisation point), compile, data, checkpoint, or user code.
"""

from __future__ import annotations

import importlib.metadata
import linecache
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ddp_doctor.jobwatch.envplan import STACK_SIGNAL

PYSPY_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str

    def where(self) -> str:
        return f"{self.file}:{self.line} in {self.func}"

    def source(self) -> str:
        return linecache.getline(self.file, self.line).strip() if os.path.isfile(self.file) else ""


@dataclass(frozen=True)
class Stack:
    text: str
    """The dump as captured (every thread)."""
    frames: tuple[Frame, ...]
    """The main thread's frames, innermost first."""
    method: str
    """py-spy | hook (the startup hook's thread) | faulthandler (the hook, on SIGURG)."""


@dataclass(frozen=True)
class Activity:
    kind: str
    """init | collective | backward | cuda | compile | data | checkpoint | eval | user | unknown."""
    label: str
    """A short sentence: 'waiting in all_reduce', 'compiling (torch._inductor)'."""
    frame: Frame | None
    """The user's own innermost frame (outside site-packages), what the rank's code is at."""


# ---- parsing --------------------------------------------------------------------------------

_FH_THREAD = re.compile(r"^(Current thread|Thread) (0x[0-9a-f]+)", re.MULTILINE)
_FH_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_SPY_THREAD = re.compile(r'^Thread (?P<tid>\d+|0x[0-9a-fA-F]+) \((?P<state>[^)]*)\)(?:: "(?P<name>[^"]*)")?')
_SPY_FRAME = re.compile(r"^\s+(?P<func>\S+) \((?P<file>.+):(?P<line>\d+)\)")


def _is_thread_bootstrap(frames: list[Frame]) -> bool:
    return bool(frames) and frames[-1].file.endswith("threading.py") and frames[-1].func.startswith("_bootstrap")


def parse_faulthandler(text: str) -> list[list[Frame]]:
    threads: list[list[Frame]] = []
    for line in text.splitlines():
        if _FH_THREAD.match(line):
            threads.append([])
            continue
        m = _FH_FRAME.match(line)
        if m and threads:
            threads[-1].append(Frame(m["file"], int(m["line"]), m["func"]))
    return threads


def parse_pyspy(text: str) -> list[tuple[str, list[Frame]]]:
    threads: list[tuple[str, list[Frame]]] = []
    for line in text.splitlines():
        t = _SPY_THREAD.match(line)
        if t:
            threads.append((t["name"] or "", []))
            continue
        m = _SPY_FRAME.match(line)
        if m and threads:
            threads[-1][1].append(Frame(m["file"], int(m["line"]), m["func"]))
    return threads


def main_frames(text: str, method: str) -> tuple[Frame, ...]:
    if method == "py-spy":
        spy = parse_pyspy(text)
        named = [f for name, f in spy if name == "MainThread"]
        candidates = named or [f for _, f in spy if not _is_thread_bootstrap(f)]
    else:
        candidates = [f for f in parse_faulthandler(text) if not _is_thread_bootstrap(f)]
    return tuple(candidates[-1]) if candidates else ()


# ---- classification -------------------------------------------------------------------------

_INIT_FUNCS = frozenset(
    (
        "init_process_group",
        "_new_process_group_helper",
        "rendezvous",
        "_store_based_barrier",
        "new_group",
        "init_device_mesh",
    )
)
_EVAL_FUNC = re.compile(r"(?i)^(?:_?(?:run_|do_)?(?:eval|evaluate|evaluation|validate|validation|val|test)(?:_.*)?)$")
"""An evaluation loop by its function's name: evaluate(), run_eval(), validation_step(), val_epoch(), test()."""
_COMPILER_PATHS = ("torch/_dynamo", "torch/_inductor", "torch/fx/", "torch/_functorch", "/triton/")
_CUDA_SYNC = re.compile(r"\.(item|cpu|tolist|numpy)\(\)|cuda\.synchronize|\.synchronize\(\)|torch\.cuda\._sleep")


def _library(f: Frame) -> bool:
    return "site-packages" in f.file or "dist-packages" in f.file or f.file.startswith("<") or "/lib/python3" in f.file


def user_frame(frames: tuple[Frame, ...]) -> Frame | None:
    return next((f for f in frames if not _library(f)), frames[0] if frames else None)


def classify(frames: tuple[Frame, ...]) -> Activity:
    if not frames:
        return Activity("unknown", "no Python stack", None)
    mine = user_frame(frames)
    imports = [i for i, f in enumerate(frames) if f.file.startswith("<frozen importlib")]
    if imports:
        # An import is part of whatever asked for it: torch.compile and dynamo import inductor's modules lazily,
        # so the frames outside the outermost import say what the rank is doing. Only work kinds take it over: an
        # import is never waiting, so it must not become "collective" or "init" for the hang judgement.
        caller = classify(frames[imports[-1] + 1 :])
        if caller.kind in ("compile", "data", "checkpoint"):
            return Activity(caller.kind, f"{caller.label}, importing its modules", mine)
        return Activity("import", "importing modules", mine)
    init = next((f for f in frames if f.func in _INIT_FUNCS and "torch/distributed" in f.file.replace("\\", "/")), None)
    if init is not None:
        return Activity("init", f"waiting in torch.distributed {init.func} (process-group init)", mine)
    for f in frames:
        path = f.file.replace("\\", "/")
        if "torch/distributed/checkpoint" in path or path.endswith("torch/serialization.py"):
            return Activity("checkpoint", f"saving/loading a checkpoint ({f.func})", mine)
        if "torch/distributed/" in path and "torch/distributed/elastic" not in path:
            return Activity("collective", f"waiting in torch.distributed {f.func}", mine)
        if any(k in path for k in _COMPILER_PATHS) or (path.endswith("torch/__init__.py") and f.func == "compile"):
            return Activity("compile", f"compiling ({f.func} in {_module_of(path)})", mine)
        if "torch/utils/data" in path:
            return Activity("data", f"loading data ({f.func})", mine)
        if path.endswith("torch/cuda/__init__.py") and f.func == "synchronize":
            return Activity("cuda", "waiting for CUDA work (torch.cuda.synchronize)", mine)
        if "torch/autograd" in path:
            return Activity("backward", "in backward (autograd; DDP all-reduces gradients here)", mine)
    if mine is not None and _CUDA_SYNC.search(mine.source()):
        return Activity("cuda", f"waiting for CUDA work ({mine.source()[:80]})", mine)
    evaluating = next((f for f in frames if not _library(f) and _EVAL_FUNC.match(f.func)), None)
    if evaluating is not None:
        return Activity(
            "eval", f"evaluating ({evaluating.func} at {os.path.basename(evaluating.file)}:{evaluating.line})", mine
        )
    source = mine.source() if mine else ""
    label = f"running {mine.func} at {os.path.basename(mine.file)}:{mine.line}" if mine else "running"
    return Activity("user", label + (f": {source[:80]}" if source else ""), mine)


def _module_of(path: str) -> str:
    i = path.find("torch/")
    return path[i:].split("/")[1] if i >= 0 else os.path.basename(path)


def phase_of_traceback(text: str) -> str:
    """The phase a rank failed in, from its traceback: init, collective, data, compile, backward, ..."""
    frames = [Frame(m[1], int(m[2]), m[3]) for m in re.finditer(r'File "([^"]+)", line (\d+), in (\S+)', text)]
    frames.reverse()  # tracebacks are outermost first
    if any(f.func in ("init_process_group", "_new_process_group_helper", "rendezvous") for f in frames):
        return "init"
    act = classify(tuple(frames))
    return {"collective": "collective", "user": "training step (user code)"}.get(act.kind, act.kind)


# ---- capture --------------------------------------------------------------------------------


def pyspy_path() -> str | None:
    found = shutil.which("py-spy")
    if found:
        return found
    beside = Path(sys.executable).with_name("py-spy")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return _pyspy_from_its_wheel()


def _pyspy_from_its_wheel() -> str | None:
    """The binary the py-spy wheel installed, wherever its scripts went (`pip --target DIR` puts it in
    DIR/bin, `pip --user` in ~/.local/bin): read from the distribution's own file list."""
    try:
        dist = importlib.metadata.distribution("py-spy")
    except importlib.metadata.PackageNotFoundError:
        return None
    # RECORD's path is relative to where pip first installed it; `--target` then moves bin/ beside it.
    listed = [Path(str(f.locate())) for f in dist.files or [] if f.name == "py-spy"]
    for path in [*listed, Path(str(dist.locate_file("bin/py-spy")))]:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path.resolve())
    return None


def pyspy_dump(pid: int, nonblocking: bool = False) -> tuple[str | None, str]:
    """(stack text, '') or (None, why py-spy could not: its own error, one line)."""
    exe = pyspy_path()
    if exe is None:
        return None, "py-spy is not installed"
    argv = [exe, "dump", "--full-filenames", "--pid", str(pid)] + (["--nonblocking"] if nonblocking else [])
    # RUST_BACKTRACE=0: py-spy's error chain without the Rust backtrace a user's environment may ask for.
    env = {**os.environ, "RUST_BACKTRACE": "0"}
    try:
        done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=PYSPY_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return None, f"py-spy dump timed out after {PYSPY_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return None, f"py-spy could not run: {exc.strerror or exc}"
    if done.returncode != 0 or "Thread" not in done.stdout:
        return None, f"py-spy failed (exit {done.returncode}): {pyspy_error(done.stderr or done.stdout)}"
    return done.stdout, ""


def pyspy_error(text: str) -> str:
    """py-spy's error as one line: 'Error: X' and its 'Caused by:' chain, without a backtrace.

    py-spy (anyhow) prints e.g. 'Error: Failed to get stack traces / Caused by: / 0: Failed to suspend
    process / 1: EPERM: Operation not permitted' when the kernel refuses ptrace.
    """
    parts: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("Stack backtrace:"):
            break
        if s.startswith("Error:"):
            parts.append(s[len("Error:") :].strip())
        elif parts and s and s != "Caused by:":
            cause = re.sub(r"^\d+:\s*", "", s)
            if cause not in parts:
                parts.append(cause)
    if parts:
        return ": ".join(parts)
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return lines[-1] if lines else "no output"


_REFUSED = re.compile(r"EPERM|EACCES|Operation not permitted|Permission denied|ptrace", re.IGNORECASE)


def refused_by_kernel(why: str) -> bool:
    """py-spy's error says the kernel refused it (ptrace / process_vm_readv denied), not that it merely failed."""
    return why.startswith("py-spy failed") and bool(_REFUSED.search(why))


def stack_signal() -> int:
    return int(getattr(signal, STACK_SIGNAL))


def ask_faulthandler(pid: int) -> bool:
    try:
        os.kill(pid, stack_signal())
        return True
    except (ProcessLookupError, PermissionError):
        return False
