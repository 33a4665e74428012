"""What a rank writes into the run directory, and how the parent reads it back.

Inside a rank (any entry module started by `launch`):

    from ddp_doctor.live import rankio
    rankio.heartbeat("collectives", step="all_reduce")   # where this rank is, for the parent
    rankio.write_result({...})                          # rank-N.json, atomically

Every file is replaced by an atomic rename, so the parent never reads half a file even when
a rank is killed mid-write. This module must stay importable without torch: the parent uses it.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import time
from pathlib import Path
from typing import Any

RUN_DIR_ENV = "DDP_DOCTOR_RUN_DIR"
NODE_ENV = "DDP_DOCTOR_NODE"

_progress = itertools.count(1)
_phase: dict[str, Any] = {}  # the phase of this rank's last heartbeat: its name, start and deadline
_RANK_FILE = re.compile(r"^rank-(\d+)\.(json|hb|stack|error\.json|log)$")


def run_dir() -> Path:
    value = os.environ.get(RUN_DIR_ENV)
    if not value:
        raise RuntimeError(f"{RUN_DIR_ENV} is not set: this entry point must be started by ddp_doctor.live.launch")
    return Path(value)


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def path(kind: str, rank_: int | None = None) -> Path:
    """run_dir/rank-N.<kind>; kind is json, hb, stack, error.json or log."""
    return run_dir() / f"rank-{rank() if rank_ is None else rank_}.{kind}"


def write_atomic(target: Path, data: str) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, target)


def heartbeat(phase: str, step: str | None = None, deadline: float | None = None) -> None:
    """Record where this rank is. `progress` only grows, so the rank with the lowest one is the laggard.
    `since` is when this phase began and `deadline` (epoch seconds) when it must end: the parent shows them."""
    now = time.time()
    if _phase.get("phase") != phase:
        _phase.clear()
        _phase.update(phase=phase, since=now, deadline=None)
    if deadline is not None and deadline != float("inf"):
        _phase["deadline"] = deadline
    beat = {
        "phase": phase,
        "step": step,
        "time": now,
        "pid": os.getpid(),
        "progress": next(_progress),
        "since": _phase["since"],
        "deadline": _phase["deadline"],
    }
    write_atomic(path("hb"), json.dumps(beat))


def write_result(payload: dict[str, Any]) -> None:
    write_atomic(path("json"), json.dumps(payload, default=str))


# ---- parent side ---------------------------------------------------------------------------


def _read_json(p: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(p.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def scan(directory: Path, kind: str) -> dict[int, Path]:
    found: dict[int, Path] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return found
    for name in names:
        m = _RANK_FILE.match(name)
        if m and m.group(2) == kind:
            found[int(m.group(1))] = directory / name
    return found


def read_heartbeats(directory: Path) -> dict[int, dict[str, Any]]:
    beats = {r: _read_json(p) for r, p in scan(directory, "hb").items()}
    return {r: b for r, b in beats.items() if b is not None}


def read_results(directory: Path) -> dict[int, dict[str, Any]]:
    results = {r: _read_json(p) for r, p in scan(directory, "json").items()}
    return {r: v for r, v in results.items() if v is not None}


def read_error_files(directory: Path) -> dict[int, dict[str, Any]]:
    """torchelastic error files (`@record`), one per rank that died of an uncaught exception."""
    errors = {r: _read_json(p) for r, p in scan(directory, "error.json").items()}
    return {r: v for r, v in errors.items() if v is not None}
