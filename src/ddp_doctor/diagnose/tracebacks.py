"""Read Python tracebacks out of a log: the exception, its message line and its frames, per rank.

Python prints `Traceback (most recent call last):`, then each frame as `File "PATH", line N, in FUNC` with the
source line (and, since 3.11, a line of carets) indented below it, then the exception line `TYPE: MESSAGE`; a
chained exception follows after "During handling of the above exception..." or "The above exception was the
direct cause...". Ranks that print at once interleave their lines, so one traceback is followed per origin (the
file and the rank / pod / host prefixes). The exception line is the first line after the frames that is not
indented below them: a multi-line message's later lines (torch's hints such as "In addition, you can set the
environment variable TORCH_DISTRIBUTED_DEBUG...") are never taken for it.
Source: https://docs.python.org/3/library/traceback.html
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddp_doctor.diagnose.lines import Origin
from ddp_doctor.diagnose.phases import TracebackFrame

HEADER = r"Traceback \(most recent call last\):"
FRAME = r'File "[^"]+", line \d+, in '
PATTERNS = (HEADER, FRAME)
"""What the block reader must find for this reader (their next lines come as context)."""
FOLLOW_LINES = 4
"""Lines after a frame line the reader needs: the source line, the carets, the exception line."""
_HEADER = re.compile(HEADER)
_FRAME = re.compile(r'^(?P<indent>\s*)File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>.+?)\s*$')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:\[[^\]]*\])?)(?::\s?(?P<message>.*))?$")
_CARETS = re.compile(r"^\s*[\^~\s]+$")
_FLATTENED = re.compile(r"^(?P<func>\S+)\s{2,}(?P<source>\S.*)$")
"""A frame whose source line was pasted onto it (a copy that lost its line breaks): 'main      raise X(...)'."""
_RAISE = re.compile(r"^raise\s+[A-Za-z_][\w.]*")
_LOOSE_LINES = 8
"""Lines of the same origin after the last frame within which the exception line must come."""
MAX_KEPT = 64


@dataclass(frozen=True)
class Raised:
    """One uncaught exception as the log shows it."""

    source: str
    start: int | None
    """Line number of 'Traceback (most recent call last):'."""
    lineno: int | None
    """Line number of the exception line."""
    where: Origin
    order: int
    when: float | None
    exception: str
    """The type as printed: 'RuntimeError', 'torch.distributed.DistBackendError'."""
    message: str
    """The first line of the message."""
    frames: tuple[TracebackFrame, ...]
    """Outermost first, as printed."""
    line: str
    """The exception line as printed (prefixes removed)."""
    frame_lines: tuple[int | None, ...] = ()
    """The log's line number of each frame."""
    ignored: bool = False
    """Printed after "Exception ignored in": Python reported it and carried on."""
    cut: bool = False
    """The log ends (or moves on) before the exception line: `exception` is empty, `message` is the source
    line of the innermost frame (often the `raise` itself)."""

    @property
    def text(self) -> str:
        if self.cut:
            ran = f"; its last line run: {self.message}" if self.message else ""
            return f"an uncaught exception whose exception line the log does not show{ran}"
        return f"{self.exception}: {self.message}" if self.message else self.exception


@dataclass
class _Open:
    start: int | None
    order: int
    when: float | None
    indent: int | None = None
    frames: list[TracebackFrame] = field(default_factory=list)
    frame_lines: list[int | None] = field(default_factory=list)
    since_frame: int = 0
    ignored: bool = False
    header: bool = False
    raises: bool = False
    """The innermost frame's source line is a `raise` statement."""
    source_line: str = ""
    """The source line printed under the innermost frame so far."""


def _key(source: str, where: Origin) -> tuple[object, ...]:
    return (source, where.rank, where.local_rank, where.node, where.pid)


class TracebackReader:
    def __init__(self) -> None:
        self.raised: list[Raised] = []
        self._open: dict[tuple[object, ...], _Open] = {}
        self._ignoring: set[tuple[object, ...]] = set()
        self.count = 0

    @property
    def following(self) -> bool:
        """True while some traceback waits for its exception line."""
        return bool(self._open)

    def ignored_next(self, source: str, where: Origin) -> None:
        """Python said "Exception ignored in ...": the traceback below it did not end the process."""
        self._ignoring.add(_key(source, where))

    def line(
        self, source: str, lineno: int | None, body: str, where: Origin, order: int, when: float | None
    ) -> Raised | None:
        """One line (its prefixes already split off into `where`); the Raised it completes, if any."""
        key = _key(source, where)
        if _HEADER.search(body):
            self._open[key] = _Open(lineno, order, when, ignored=key in self._ignoring, header=True)
            self._ignoring.discard(key)
            return None
        tb = self._open.get(key)
        frame = _FRAME.match(body)
        if frame:
            if tb is None:  # the header was cut off (a paste, a summary's "traceback :" field): frames still count
                tb = self._open[key] = _Open(lineno, order, when)
            indent = len(frame.group("indent"))
            tb.indent = indent if tb.indent is None else min(tb.indent, indent)
            func, source_line = frame.group("func"), ""
            flat = _FLATTENED.match(func)
            if flat:
                func, source_line = flat.group("func"), flat.group("source").strip()
            tb.frames.append(TracebackFrame(frame.group("path"), int(frame.group("line")), func))
            tb.frame_lines.append(lineno)
            tb.since_frame = 0
            tb.source_line = source_line
            tb.raises = bool(_RAISE.match(source_line))
            return None
        if tb is None or not tb.frames:
            return None
        tb.since_frame += 1
        stripped = body.strip()
        indent = len(body) - len(body.lstrip())
        if not stripped or _CARETS.match(body) or (tb.indent is not None and indent > tb.indent):
            if tb.since_frame == 1 and stripped and not _CARETS.match(body):
                tb.source_line = stripped
                tb.raises = bool(_RAISE.match(stripped))
            if tb.since_frame > _LOOSE_LINES:
                self._cut(key)
            return None  # a frame's source line or its carets
        exc = _EXCEPTION.match(stripped)
        if exc is None or not _looks_like_type(exc.group("type")):
            if tb.since_frame > _LOOSE_LINES:
                self._cut(key)
            return None
        del self._open[key]
        raised = Raised(
            source=source,
            start=tb.start,
            lineno=lineno,
            where=where,
            order=tb.order,
            when=tb.when if tb.when is not None else when,
            exception=exc.group("type"),
            message=(exc.group("message") or "").strip(),
            frames=tuple(tb.frames),
            line=stripped,
            frame_lines=tuple(tb.frame_lines),
            ignored=tb.ignored,
        )
        self._keep(raised)
        return raised

    def finish(self) -> None:
        """The log ended: a traceback still waiting for its exception line was cut off there."""
        for key in list(self._open):
            self._cut(key)

    def _keep(self, raised: Raised) -> None:
        self.count += 1
        if len(self.raised) < MAX_KEPT:
            self.raised.append(raised)

    def _cut(self, key: tuple[object, ...]) -> None:
        # Only a traceback whose header was seen, or whose innermost frame runs a `raise`: Python prints
        # "Traceback (most recent call last):" for an exception alone, while bare frame lines also come from stack
        # dumps (traceback.print_stack, logging's stack_info) that end nothing and whose last line is never a raise.
        tb = self._open.pop(key)
        if not (tb.header or tb.raises) or not tb.frames or tb.ignored:
            return
        source, rank, local_rank, node, pid = key
        self._keep(
            Raised(
                source=str(source),
                start=tb.start,
                lineno=tb.frame_lines[-1],
                where=Origin(rank=rank, local_rank=local_rank, node=node, pid=pid),  # type: ignore[arg-type]
                order=tb.order,
                when=tb.when,
                exception="",
                message=tb.source_line,
                frames=tuple(tb.frames),
                line=f'File "{tb.frames[-1].path}", line {tb.frames[-1].line}, in {tb.frames[-1].func}',
                frame_lines=tuple(tb.frame_lines),
                cut=True,
            )
        )


def _looks_like_type(name: str) -> bool:
    # Exception classes are CamelCase (RuntimeError, DistBackendError, KeyboardInterrupt, SystemExit, ncclError is
    # not one): the last dotted part starts with a capital letter and the name holds no spaces.
    last = name.rsplit(".", 1)[-1]
    return bool(last) and last[0].isupper()
