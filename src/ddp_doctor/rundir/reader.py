"""The parent side: every rank's files of a run directory read back (files that do not parse are left out)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ddp_doctor.rundir import layout
from ddp_doctor.rundir.jsonfile import read_objects


def read_heartbeats(directory: Path) -> dict[int, dict[str, Any]]:
    return read_objects(layout.scan(directory, "hb"))


def read_results(directory: Path) -> dict[int, dict[str, Any]]:
    return read_objects(layout.scan(directory, "json"))


def read_error_files(directory: Path) -> dict[int, dict[str, Any]]:
    """torchelastic error files (`@record`), one per rank that died of an uncaught exception."""
    return read_objects(layout.scan(directory, "error.json"))


def read_stacks(directory: Path, keep_chars: int = 20000) -> dict[int, str]:
    """rank -> the end of its faulthandler stacks (the latest dump is last)."""
    stacks: dict[int, str] = {}
    for r, p in layout.scan(directory, "stack").items():
        try:
            text = p.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if text:
            stacks[r] = text[-keep_chars:]
    return stacks


def read_hook_files(directory: Path, kind: str) -> dict[int, dict[str, Any]]:
    """rank -> its rank-N.pid or rank-N.exit, written by jobwatch's startup hook inside the job."""
    if kind not in ("pid", "exit"):
        raise ValueError(f"not a hook file kind: {kind!r}")
    return read_objects(layout.scan(directory, kind))
