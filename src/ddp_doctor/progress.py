"""Progress while a command works, on stderr, when a person is watching a terminal.

Commands are the only users. The layers below never import this module or rich's live display:
they take a plain callback (`launch(..., on_poll=...)` gets the ranks' heartbeats, the image reader
a meter) and the command turns what it hears into lines here. Nothing is shown in pipes, in CI
(`CI` set), with `--quiet`, or for machine formats; `NO_COLOR` is honoured. The display is
transient: it is gone before the report is printed.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ddp_doctor.rundir.records import Heartbeat
from ddp_doctor.words import human_bytes, plural

MACHINE_FORMATS = ("json", "junit", "sarif")
REFRESH_PER_S = 4

Beats = dict[int, Heartbeat]


def wanted(fmt: str, quiet: bool, output: str | None) -> bool:
    """A person watches: stderr is a terminal, and so is stdout unless the report goes to --output."""
    if quiet or fmt in MACHINE_FORMATS or os.environ.get("CI"):
        return False
    return _isatty(sys.stderr) and (output not in (None, "-") or _isatty(sys.stdout))


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class Latest:
    """The newest value a lower layer reported (from any thread); the display reads it when it redraws."""

    def __init__(self, initial: Any = None) -> None:
        self._lock = threading.Lock()
        self._value = initial

    def set(self, value: Any) -> None:
        with self._lock:
            self._value = value

    def get(self) -> Any:
        with self._lock:
            return self._value


class Display:
    """A title with the time since it started, and the lines `view()` gives at each redraw."""

    def __init__(self, title: str, view: Callable[[], Sequence[str]] = tuple) -> None:
        self.title, self.view, self.started = title, view, time.monotonic()

    def text(self) -> str:
        lines = [f"ddp-doctor {self.title} · {time.monotonic() - self.started:.0f} s"]
        return "\n".join(lines + [f"  {line}" for line in self.view()])

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self.text(), style="dim")


@contextmanager
def live(display: Display, enabled: bool) -> Iterator[Display]:
    if not enabled:
        yield display
        return
    from rich.console import Console
    from rich.live import Live

    console = Console(file=sys.stderr, no_color="NO_COLOR" in os.environ, highlight=False)
    with Live(display, console=console, refresh_per_second=REFRESH_PER_S, transient=True, redirect_stdout=False):
        yield display


# ---- what each command shows -------------------------------------------------------------------


def rank_lines(beats: Beats | None, waiting: str, now: float | None = None) -> list[str]:
    """check: each rank's phase, how long it has been in it, and the phase's deadline."""
    if not beats:
        return [waiting]
    now = time.time() if now is None else now
    lines = []
    for rank, beat in sorted(beats.items()):
        since, deadline = beat.since, beat.deadline
        line = f"rank {rank}  {beat.phase or '?':<12}"
        if since is not None:
            line += f" {max(0.0, now - since):5.1f} s"
            if deadline is not None and deadline > since:
                line += f" of {deadline - since:.0f} s"
        if beat.step:
            line += f"  {beat.step}"
        lines.append(line)
    return lines


_BYTES = re.compile(r"\b(\d+) B\b")


def bench_lines(beats: Beats | None, waiting: str) -> list[str]:
    """bench: the op, dtype and message size being measured (the ranks move in step; rank 0 speaks)."""
    if not beats:
        return [waiting]
    beat = beats.get(0) or next(iter(beats.values()))
    step = _BYTES.sub(lambda m: human_bytes(int(m.group(1))), beat.step or "")
    phase = beat.phase
    return [f"{phase}: {step}" if step else phase, plural(len(beats), "rank") + " running"]


def bytes_lines(read: int, total: int | None, what: str) -> list[str]:
    """image, explain: how much of the input has been read."""
    if total:
        return [f"{what}: {human_bytes(read)} of {human_bytes(total)} ({100 * read / total:.0f}%)"]
    return [f"{what}: {human_bytes(read)}"]


_LAYER = re.compile(r"layer \d+/\d+(?: \S{1,19})?")


def layer_lines(what: str, read: list[int]) -> list[str]:
    """image: the layer being read ('layer 3/7 sha256:1a2b...') and the bytes unpacked so far."""
    m = _LAYER.search(what)
    name = m.group(0) if m else os.path.basename(what.split(": ")[0]) or "opening"
    return [f"{name}: {human_bytes(read[0] if read else 0)} read"]
