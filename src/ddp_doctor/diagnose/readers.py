"""readers.yaml loaded and compiled once: the hang and fatal-signal readers' knowledge."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class Announcement:
    handler: str
    pattern: re.Pattern[str]
    signal: int | None = None
    library: str | None = None


@dataclass(frozen=True)
class Library:
    match: re.Pattern[str]
    name: str
    meaning: str


@dataclass(frozen=True)
class EndsBadly:
    says: str
    pattern: re.Pattern[str]
    launcher: str = ""
    """For a launcher's own failure summary: the launcher that prints it (readers.yaml ends_badly.launchers)."""
    source: str = ""
    """Where that wording is printed (the launcher's source file)."""
    example: str = ""
    """A line as the launcher prints it."""


@dataclass(frozen=True)
class Knowledge:
    chatter: tuple[re.Pattern[str], ...]
    classes: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...]
    """(class, patterns) in the order they are tried: finished, init_done, collective, init_start, init,
    extension_wait, p2p_test, ray_train_start."""
    sequence: tuple[re.Pattern[str], ...]
    p2p_banner: tuple[re.Pattern[str], ...]
    """CUDA's p2pBandwidthLatencyTest announcing itself: its table lines count as activity only after it."""
    extension_lock: tuple[re.Pattern[str], ...]
    """A line saying a C++ extension's build lock file is already there (the wait that follows may never end)."""
    self_checking: tuple[re.Pattern[str], ...]
    """Banners of tests that print a result per step: ending at the table's header after one is a hang."""
    distributed_start: tuple[re.Pattern[str], ...]
    """A script's own line right before init_process_group: the job is distributed by its own word."""
    file_init: tuple[re.Pattern[str], ...]
    """A file:// init method named in the log: a stale file from an earlier run is then the first hypothesis."""
    announce: tuple[re.Pattern[str], ...]
    """A rank naming itself in the message (group rank, world): attribution and duplicate claims."""
    announcements: tuple[Announcement, ...]
    frames: tuple[re.Pattern[str], ...]
    handler_frames: re.Pattern[str]
    libraries: tuple[Library, ...]
    signals: dict[int, str]
    ends_badly: tuple[EndsBadly, ...]
    """Lines that show a process ending badly in any layer's words: a log holding one is never healthy."""

    def fatal_patterns(self) -> list[str]:
        """What the block reader must find for fatal.py: every announcement and frame line."""
        return [a.pattern.pattern for a in self.announcements] + [f.pattern for f in self.frames]


def _all(items: Any) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in items)


@functools.lru_cache(maxsize=1)
def load() -> Knowledge:
    text = resources.files("ddp_doctor.diagnose").joinpath("readers.yaml").read_text(encoding="utf-8")
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    act, fatal = data["activity"], data["fatal"]
    return Knowledge(
        chatter=_all(act["chatter"]),
        classes=tuple(
            (name, _all(act[name]))
            for name in (
                "finished",
                "init_done",
                "collective",
                "init_start",
                "init",
                "extension_wait",
                "p2p_test",
                "ray_train_start",
            )
        ),
        extension_lock=_all(act["extension_lock"]),
        p2p_banner=_all(act["p2p_banner"]),
        sequence=_all(act["sequence"]),
        self_checking=_all(act["self_checking"]),
        distributed_start=_all(act["distributed_start"]),
        file_init=_all(act["file_init"]),
        announce=_all(act["announce"]),
        announcements=tuple(
            Announcement(a["handler"], re.compile(a["pattern"]), a.get("signal"), a.get("library"))
            for a in fatal["announcements"]
        ),
        frames=_all(fatal["frames"]),
        handler_frames=re.compile("|".join(fatal["handler_frames"])),
        libraries=tuple(Library(re.compile(x["match"]), x["name"], x["meaning"]) for x in fatal["libraries"]),
        signals={int(k): str(v) for k, v in fatal["signals"].items()},
        ends_badly=_launchers(data["ends_badly"]["launchers"])
        + tuple(EndsBadly(str(x["says"]), re.compile(x["pattern"])) for x in data["ends_badly"]["lines"]),
    )


def _launchers(rows: Any) -> tuple[EndsBadly, ...]:
    return tuple(
        EndsBadly(str(x["says"]), re.compile(x["pattern"]), str(x["launcher"]), str(x["source"]), str(x["example"]))
        for x in rows
    )
