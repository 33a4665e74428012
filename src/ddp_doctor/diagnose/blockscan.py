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
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

from ddp_doctor.diagnose.logread import CHUNK, MAX_LINE, OVERLAP, Stats, _read
from ddp_doctor.diagnose.multimatch import Engine
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
    """True for the line after a hit, fed for NCCL's "Last error:" detail only."""


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


def scan(
    stream: IO[bytes],
    engine: Engine,
    stats: Stats,
    name: str = "log",
    chunk: int = CHUNK,
    tail: Tail | None = None,
) -> Iterator[MatchedLine]:
    # One buffer for the whole read: the carry (an unfinished line) is moved to its front and the next
    # read lands behind it, so no block is allocated or copied per read.
    buf = bytearray(chunk + OVERLAP + MAX_LINE)
    view = memoryview(buf)
    have = 0  # bytes in buf (carry + new data)
    lineno = 1  # number of the line that starts at buf[0]
    want_first = False  # the previous region ended on a hit: its next line is here
    ended_with_newline = True
    while True:
        got = _readinto(stream, view[have : have + chunk], name)
        stats.bytes_read += got
        have += got
        if have == 0:
            break
        partial = False
        if got == 0:
            end = have
        else:
            end = buf.rfind(b"\n", 0, have) + 1
            if end == 0:
                if have < chunk:
                    continue  # a short read inside one line: read on
                partial = True  # one line longer than a chunk: scan it piecewise
                end = have
        region = _normalised(buf, end)
        size = len(region)
        counted = 0
        line_at = lineno
        next_free = 0
        if want_first:
            le = buf.find(b"\n", 0, end) if isinstance(region, memoryview) else region.find(b"\n")
            le = size if le < 0 else le
            yield MatchedLine(lineno, _line(region, 0, le, 0), context=True)
            want_first = False
        text_of = buf if isinstance(region, memoryview) else region
        for pos in engine.positions(region):
            if pos < next_free:
                continue
            ls = text_of.rfind(b"\n", 0, pos) + 1
            le = text_of.find(b"\n", pos, size)
            le = size if le < 0 else le
            line_at += text_of.count(b"\n", counted, ls)
            counted = ls
            stats.candidates += 1
            text = _line(region, ls, le, pos)
            yield MatchedLine(line_at, text, engine.which(text))
            next_free = le + 1
            if le + 1 < size:
                ne = text_of.find(b"\n", le + 1, size)
                ne = size if ne < 0 else ne
                yield MatchedLine(line_at + 1, _line(region, le + 1, ne, le + 1), context=True)
            elif not partial:
                want_first = True
        newlines = line_at - lineno + text_of.count(b"\n", counted, size)
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
