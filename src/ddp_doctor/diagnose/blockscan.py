"""Scan a log of any size in large blocks; do per-line work only around the multi-matcher's hits.

Each block (4 MB, cut after its last newline) goes once through the compiled multi-pattern engine
(multimatch.py); newlines are counted in C (`bytes.count`) so every hit still gets its exact line
number. For each hit line the engine says which patterns it holds, so the matcher tests those
signatures only. The last TAIL_BYTES are kept for what a log does not say (hang.py): which rank
printed what last. Memory: one block, the carry of an unfinished line, the tail.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO

from ddp_doctor.diagnose.logread import CHUNK, MAX_LINE, OVERLAP, Stats, _read
from ddp_doctor.diagnose.multimatch import UNKNOWN, Engine
from ddp_doctor.errors import InputError

TAIL_BYTES = 256 << 10
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


@dataclass(frozen=True)
class MatchedLine:
    lineno: int
    text: bytes
    ids: frozenset[int] = frozenset()
    """Indexes of the engine's patterns that match this line; empty for a context line."""
    context: bool = False
    """True for a line after a hit that asked for its next lines (see `scan`'s follow); it holds no match."""


@dataclass
class Tail:
    """The last bytes of the log, with the number of their first whole line."""

    limit: int = TAIL_BYTES
    data: bytes = b""
    end_lineno: int = 0
    """Number of the last line in `data`."""
    lines: list[tuple[int, str]] = field(default_factory=list)

    def feed(self, region: bytes, last_lineno: int) -> None:
        self.data = (self.data + region[-self.limit :])[-self.limit :]
        self.end_lineno = last_lineno

    def finish(self) -> list[tuple[int, str]]:
        data = self.data
        if len(data) >= self.limit:  # the first line is cut: drop it
            data = data[data.find(b"\n") + 1 :]
        text = data.decode("utf-8", "replace")
        rows = text.split("\n")
        if rows and rows[-1] == "":
            rows.pop()
        first = self.end_lineno - len(rows) + 1
        self.lines = [(first + i, row) for i, row in enumerate(rows)]
        return self.lines


def _normalised(buf: bytearray, end: int) -> bytes | memoryview:
    # Colour codes and CR would hide anchored patterns; neither holds a newline, so line numbers stay.
    if buf.find(b"\x1b", 0, end) < 0 and buf.find(b"\r", 0, end) < 0:
        return memoryview(buf)[:end]  # the common case: no copy
    region = bytes(buf[:end])
    if b"\x1b" in region:
        region = _ANSI.sub(b"", region)
    return region.replace(b"\r\n", b"\n")


def _readinto(stream: IO[bytes], view: memoryview, name: str) -> int:
    if not hasattr(stream, "readinto"):
        data = _read(stream, len(view), name)
        view[: len(data)] = data
        return len(data)
    try:
        return stream.readinto(view) or 0
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise InputError(f"cannot read {name}: {exc} (corrupt or truncated compressed file?)") from None
    except Exception as exc:  # zstandard.ZstdError and kin
        if type(exc).__module__.startswith("zstandard"):
            raise InputError(f"cannot read {name}: {exc} (corrupt zstd file?)") from None
        raise


def _line(region: bytes | memoryview, start: int, end: int, hit: int) -> bytes:
    if end - start > MAX_LINE:
        start = max(start, hit - MAX_LINE // 2)
        end = min(end, start + MAX_LINE)
    return bytes(region[start:end])


def _following(
    region: bytes | memoryview, text_of: bytes | bytearray, start: int, lineno: int, count: int, stop: int
) -> tuple[list[MatchedLine], int]:
    """Up to `count` lines from `start` (numbered from `lineno`) as context, none at or past offset `stop`
    (a line holding a hit is yielded as a hit); and where the next line starts."""
    out: list[MatchedLine] = []
    size = len(region)
    at = start
    while len(out) < count and at < size:
        end = text_of.find(b"\n", at, size)
        end = size if end < 0 else end
        if end >= stop:
            break
        out.append(MatchedLine(lineno + len(out), _line(region, at, end, at), context=True))
        at = end + 1
    return out, at


@dataclass
class _Region:
    """One block's hits turned into lines."""

    engine: Engine
    follow: Mapping[int, int]
    once: frozenset[int]
    seen_once: set[bytes]
    stats: Stats
    precede: frozenset[int] = frozenset()

    def lines(
        self, region: bytes | memoryview, text_of: bytes | bytearray, lineno: int, pending: int, partial: bool
    ) -> tuple[list[MatchedLine], int, int]:
        """(the region's hit and context lines, its number of newlines, the context lines owed to the next
        region) for one region whose first line is number `lineno`."""
        size = len(region)
        found = self.engine.hits(region)
        out: list[MatchedLine] = []
        if pending:  # context a hit at the end of the previous block asked for
            owed, _ = _following(region, text_of, 0, lineno, pending, found[0][0] if found else size + 1)
            out += owed
        counted, line_at, next_free, i, owe = 0, lineno, 0, 0, 0
        hits, once = len(found), self.once
        rfind, find = text_of.rfind, text_of.find
        while i < hits:
            pos, first = found[i]
            i += 1
            ls = rfind(b"\n", 0, pos) + 1
            le = find(b"\n", pos, size)
            le = size if le < 0 else le
            ids_seen = {first}
            while i < hits and found[i][0] <= le:  # more matches on this line (rare)
                ids_seen.add(found[i][1])
                i += 1
            if ls < next_free:
                continue
            if once and ids_seen <= once and self._repeated(text_of, ls, le):
                continue
            line_at += text_of.count(b"\n", counted, ls)
            counted = ls
            self.stats.candidates += 1
            text = _line(region, ls, le, pos)
            ids = self.engine.which(text) if UNKNOWN in ids_seen else frozenset(ids_seen)
            if ls > 0 and self.precede and not self.precede.isdisjoint(ids):
                ps = text_of.rfind(b"\n", 0, ls - 1) + 1
                if ps >= next_free:  # the line before, unless it was yielded already
                    out.append(MatchedLine(line_at - 1, _line(region, ps, ls - 1, ps), context=True))
            out.append(MatchedLine(line_at, text, ids))
            next_free = le + 1
            more = max((self.follow[x] for x in ids if x in self.follow), default=0)
            if more:
                after, next_free = _following(
                    region, text_of, le + 1, line_at + 1, more, found[i][0] if i < len(found) else size + 1
                )
                out += after
                if len(after) < more and next_free >= size and not partial:
                    owe = more - len(after)
        newlines = line_at - lineno + text_of.count(b"\n", counted, size)
        return out, newlines, owe

    def _repeated(self, text_of: bytes | bytearray, ls: int, le: int) -> bool:
        """A line of only `once` patterns from a process ("host:pid" prefix) that printed one already; a line
        without that prefix is never a repeat."""
        cut = text_of.find(b" [", ls, le)
        if cut < 0:
            return False
        head = text_of[ls:cut]
        key = bytes(head[: head.rfind(b":")])  # "host:pid:tid" -> "host:pid"
        if key in self.seen_once:
            return True
        self.seen_once.add(key)
        return False


def scan(
    stream: IO[bytes],
    engine: Engine,
    stats: Stats,
    name: str = "log",
    chunk: int = CHUNK,
    tail: Tail | None = None,
    follow: Mapping[int, int] | None = None,
    once: frozenset[int] = frozenset(),
    precede: frozenset[int] = frozenset(),
) -> Iterator[MatchedLine]:
    """Every line holding a match, with the indexes of the patterns it holds; after a line holding a pattern
    named in `follow` (pattern index -> n), its next n lines as context (a traceback frame's source line and the
    exception line below it; NCCL's detail under "Last error:"). A line holding only patterns in `once` is
    yielded for the first process that prints it (its "host:pid" prefix) and skipped after: NCCL announces each
    rank once per communicator, and only the first announcement names the rank. A line holding a pattern in
    `precede` comes after the line before it, as context (a traceback's header takes the time of the log line
    printed just before it). Nothing else is looked at line by line."""
    blocks = _Region(engine, follow or {}, once, set(), stats, precede)
    # One buffer for the whole read: the carry (an unfinished line) is moved to its front and the next
    # read lands behind it, so no block is allocated or copied per read.
    buf = bytearray(chunk + OVERLAP + MAX_LINE)
    view = memoryview(buf)
    have = 0  # bytes in buf (carry + new data)
    lineno = 1  # number of the line that starts at buf[0]
    pending = 0  # context lines still owed from a hit at the end of the previous region
    ended_with_newline = True
    while True:
        got = _readinto(stream, view[have : have + chunk], name)
        stats.bytes_read += got
        have += got
        if have == 0:
            break
        partial = False
        end = have
        if got:
            end = buf.rfind(b"\n", 0, have) + 1
            if end == 0:
                if have < chunk:
                    continue  # a short read inside one line: read on
                partial = True  # one line longer than a chunk: scan it piecewise
                end = have
        region = _normalised(buf, end)
        size = len(region)
        text_of = buf if isinstance(region, memoryview) else region
        found, newlines, pending = blocks.lines(region, text_of, lineno, pending, partial)
        yield from found
        lineno += newlines
        stats.lines += newlines
        ended_with_newline = size > 0 and text_of[size - 1] == 10
        if tail is not None and not partial:
            tail.feed(bytes(region[max(0, size - tail.limit) : size]), lineno - 1 if ended_with_newline else lineno)
        keep = min(OVERLAP, have) if partial else have - end
        if keep:
            buf[:keep] = buf[have - keep : have]  # same length: the buffer is never resized
        have = keep
        if got == 0:
            break
    if not ended_with_newline:
        stats.lines += 1
