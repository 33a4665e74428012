"""Open a log of any size (file or stdin; plain, gzip or zstd) as one binary stream; read limits.

blockscan.py reads the stream in CHUNK-sized blocks; lines are cut at MAX_LINE bytes, so a 100 MB
line costs no more memory than a block; bytes that are not UTF-8 are replaced, never fatal.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
import zlib
from dataclasses import dataclass
from typing import IO, cast

from ddp_doctor.errors import InputError

CHUNK = 4 << 20
MAX_LINE = 8 << 10
OVERLAP = 512
"""Bytes kept from a line longer than a chunk, so a pattern cut at the boundary is still seen."""


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
