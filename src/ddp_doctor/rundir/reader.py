"""The parent side: every rank's files of a run directory read back.

A result or heartbeat file that is not a record of this schema (cut short, foreign, another version)
is named in `Read.unreadable` with why, so the report can say so instead of treating the rank as
silent for no stated reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from ddp_doctor.rundir import layout
from ddp_doctor.rundir.errorfile import ErrorFile
from ddp_doctor.rundir.jsonfile import read_objects
from ddp_doctor.rundir.records import Heartbeat, RankResult

T = TypeVar("T")


@dataclass(frozen=True)
class Read(Generic[T]):
    records: dict[int, T] = field(default_factory=dict)
    """rank -> its record."""
    unreadable: dict[str, str] = field(default_factory=dict)
    """file name -> why it is not a record (RecordError's line)."""


def _read(directory: Path, kind: str, parse: Callable[[str, str], T]) -> Read[T]:
    out: Read[T] = Read()
    for r, p in sorted(layout.scan(directory, kind).items()):
        try:
            text = p.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # gone between the listing and the read: nothing to say about it
        try:
            out.records[r] = parse(text, p.name)
        except ValueError as exc:  # RecordError, or the ValueError of a record defined outside this package
            out.unreadable[p.name] = str(exc)
    return out


def heartbeats(directory: Path) -> Read[Heartbeat]:
    return _read(directory, "hb", Heartbeat.from_json)


def results(directory: Path) -> Read[RankResult]:
    return _read(directory, "json", RankResult.from_json)


def read_heartbeats(directory: Path) -> dict[int, Heartbeat]:
    """The heartbeats that read as records (while polling; `heartbeats` also says which did not)."""
    return heartbeats(directory).records


def read_error_files(directory: Path) -> dict[int, ErrorFile]:
    """torchelastic error files (`@record`), one per rank that died of an uncaught exception (a file that
    is no JSON object is left out)."""
    return {r: ErrorFile.from_object(d) for r, d in read_objects(layout.scan(directory, "error.json")).items()}


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


def read_hook_files(directory: Path, kind: str, parse: Callable[[str, str], T]) -> Read[T]:
    """rank -> its rank-N.pid or rank-N.exit, written by jobwatch's startup hook inside the job. The hook runs
    in the job's own interpreter with the standard library only, so its records live beside it (parse is
    theirs: text, file name -> record, or a ValueError saying why the file is none)."""
    if kind not in ("pid", "exit"):
        raise ValueError(f"not a hook file kind: {kind!r}")
    return _read(directory, kind, parse)
