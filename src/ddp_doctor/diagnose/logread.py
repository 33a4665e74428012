"""Read a log of any size in bounded memory and hand the matcher only the lines that matter.

The file is read in fixed-size chunks; one combined regex (prefilter.py) finds the candidate
lines inside each chunk, and only those (plus the line after each, for NCCL's "Last error:")
are decoded. Lines are cut at MAX_LINE bytes, so a 100 MB line costs no more memory than a
chunk; bytes that are not UTF-8 are replaced, never fatal.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, cast

from ddp_doctor.errors import InputError

CHUNK = 4 << 20
MAX_LINE = 8 << 10
OVERLAP = 512
"""Bytes kept from a line longer than a chunk, so a pattern cut at the boundary is still seen."""


@dataclass(frozen=True)
class Candidate:
    lineno: int
    text: bytes
    context: bool = False
    """True for the line after a candidate, fed for "Last error:" details only."""


@dataclass
class Stats:
    bytes_read: int = 0
    lines: int = 0
    candidates: int = 0


_GZIP = b"\x1f\x8b"
_ZSTD = b"\x28\xb5\x2f\xfd"


def open_log(path: str) -> tuple[IO[bytes], str]:
    """A binary stream of the log's content (gzip / zstd unpacked on the fly) and its display name."""
    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
        name = "stdin"
    else:
        if os.path.isdir(path):
            raise InputError(f"{path} is a directory; expected a log file (or '-' for stdin)")
        try:
            raw = open(path, "rb")  # noqa: SIM115 - closed by the caller
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
        name = os.path.basename(path)
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(raw)  # type: ignore[type-var]
    magic = buffered.peek(4)[:4]
    if magic[:2] == _GZIP:
        return cast(IO[bytes], gzip.GzipFile(fileobj=buffered, mode="rb")), name
    if magic == _ZSTD:
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(buffered), name
    return buffered, name


def _read(stream: IO[bytes], size: int, name: str) -> bytes:
    try:
        return stream.read(size)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise InputError(f"cannot read {name}: {exc} (corrupt or truncated compressed file?)") from None
    except Exception as exc:  # zstandard.ZstdError and kin
        if type(exc).__module__.startswith("zstandard"):
            raise InputError(f"cannot read {name}: {exc} (corrupt zstd file?)") from None
        raise


def _cap(region: bytes, start: int, end: int, hit: int) -> bytes:
    if end - start <= MAX_LINE:
        return region[start:end]
    lo = max(start, hit - MAX_LINE // 2)
    return region[lo : min(end, lo + MAX_LINE)]


def scan(stream: IO[bytes], prefilter: Any, stats: Stats, name: str = "log", chunk: int = CHUNK) -> Iterator[Candidate]:
    carry = b""
    lineno = 1  # number of the line that starts at region[0]
    want_first = False  # the previous region ended on a candidate: its next line is here
    while True:
        data = _read(stream, chunk, name)
        stats.bytes_read += len(data)
        buf = carry + data if carry else data
        if not buf:
            break
        if not data:
            end = len(buf)
            partial = False
        else:
            end = buf.rfind(b"\n") + 1
            partial = end == 0
            if partial:
                if len(buf) < chunk:
                    carry = buf
                    continue
                end = len(buf)  # one line longer than a chunk: scan it piecewise
        region = buf[:end] if end < len(buf) else buf
        counted = 0
        line_at = lineno
        next_free = 0
        if want_first:
            le = region.find(b"\n")
            le = end if le < 0 else le
            yield Candidate(lineno, _cap(region, 0, le, 0), context=True)
            want_first = False
        for m in prefilter.finditer(region):
            pos = m.start()
            if pos < next_free:
                continue
            ls = region.rfind(b"\n", 0, pos) + 1
            le = region.find(b"\n", pos)
            le = end if le < 0 else le
            line_at += region.count(b"\n", counted, ls)
            counted = ls
            stats.candidates += 1
            yield Candidate(line_at, _cap(region, ls, le, pos))
            next_free = le + 1
            if le + 1 < end:
                ne = region.find(b"\n", le + 1)
                ne = end if ne < 0 else ne
                yield Candidate(line_at + 1, _cap(region, le + 1, ne, le + 1), context=True)
            elif not partial:
                want_first = True
        newlines = region.count(b"\n", counted, end) + (line_at - lineno)
        lineno += newlines
        stats.lines += newlines
        if partial:
            carry = buf[-OVERLAP:]
        else:
            carry = buf[end:]
        if not data:
            break
    if buf and not buf.endswith(b"\n"):
        stats.lines += 1
