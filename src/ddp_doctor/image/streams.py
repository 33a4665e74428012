"""Pull-based byte streams: bounded slices of a file, digest checking, gzip/zstd with a bomb guard.

Every stream has `read(n) -> bytes` returning b"" only at its end; nothing is ever written to disk.
"""

from __future__ import annotations

import hashlib
import queue
import re
import threading
import zlib
from collections.abc import Iterable
from typing import Any, BinaryIO, Protocol

from ddp_doctor.errors import InputError
from ddp_doctor.image.limits import Limits

CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
DIGEST_RE = re.compile(r"^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$")


class Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


def check_digest(digest: object, what: str) -> str:
    if not isinstance(digest, str) or not DIGEST_RE.match(digest):
        raise InputError(
            f"{what}: digest {str(digest)[:80]!r} is not 'sha256:<64 hex>' (or sha512); the manifest is malformed"
        )
    return digest


class Slice:
    """`size` bytes of `f` from `offset`; a short file is reported as truncated, never padded."""

    def __init__(self, f: BinaryIO, offset: int, size: int, what: str) -> None:
        self._f, self._pos, self._left, self._what = f, offset, size, what

    def read(self, n: int = -1, /) -> bytes:
        if self._left <= 0:
            return b""
        n = self._left if n < 0 else min(n, self._left)
        self._f.seek(self._pos)
        data = self._f.read(n)
        if not data:
            raise InputError(f"{self._what} is truncated: {self._left} more bytes were declared than the file holds")
        self._pos += len(data)
        self._left -= len(data)
        return data


class Hashing:
    """Hashes what passes through; `verify()` compares size and digest with what was declared."""

    def __init__(self, src: Readable, digest: str | None, what: str, size: int | None = None) -> None:
        self._src, self.expected, self._what, self._size = src, digest, what, size
        algo = digest.split(":", 1)[0] if digest else "sha256"
        self._h = hashlib.new(algo)
        self.count = 0

    def read(self, n: int = -1, /) -> bytes:
        data = self._src.read(n)
        if data:
            self._h.update(data)
            self.count += len(data)
            if self._size is not None and self.count > self._size:
                raise InputError(f"{self._what} holds more than the {self._size} bytes its descriptor declares")
        return data

    @property
    def digest(self) -> str:
        return f"{self._h.name}:{self._h.hexdigest()}"

    def drain(self) -> None:
        while self.read(CHUNK):
            pass

    def verify(self) -> str:
        self.drain()
        if self._size is not None and self.count != self._size:
            raise InputError(
                f"{self._what} is truncated: {self.count} bytes read, its descriptor declares {self._size}"
            )
        actual = self.digest
        if self.expected is not None and actual != self.expected:
            raise InputError(
                f"{self._what} has digest {actual}, expected {self.expected}: "
                "the archive is corrupt or was modified; fetch or save the image again"
            )
        return actual


class ReadAhead:
    """Reads (and hashes, inside `src`) on a thread while the caller decompresses and parses.

    hashlib and zlib release the GIL on large buffers, so the digest check and the inflate
    overlap on two cores; the queue bounds what is held in memory to `depth` chunks.
    """

    def __init__(self, src: Readable, depth: int = 4, chunk: int = 4 * CHUNK) -> None:
        self._src, self._chunk = src, chunk
        self._q: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._buf = b""
        self._done = False
        self._thread = threading.Thread(target=self._run, name="ddp-doctor-read-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                data = self._src.read(self._chunk)
                self._put(data)
                if not data:
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, which raises it in its own thread
            self._put(exc)

    def _put(self, item: bytes | BaseException) -> None:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def read(self, n: int = -1, /) -> bytes:
        if not self._buf:
            if self._done:
                return b""
            item = self._q.get()
            if isinstance(item, BaseException):
                self._done = True
                raise item
            if not item:
                self._done = True
                return b""
            self._buf = item
        if n < 0 or n >= len(self._buf):
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def finish(self) -> None:
        """Read to the end, so that the source (and its digest) has seen every byte."""
        while self.read(self._chunk):
            pass
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _inflate_module() -> tuple[Any, tuple[type[BaseException], ...]]:
    """ISA-L's zlib-compatible inflate (python-isal) when installed: about 2.5x CPython's zlib."""
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib, (zlib.error,)
    isal_error: type[BaseException] = isal_zlib.error  # type: ignore[assignment]
    return isal_zlib, (zlib.error, isal_error)


_ZLIB, _ZLIB_ERRORS = _inflate_module()


class Gunzip:
    """gzip, including concatenated members (pigz, `cat a.gz b.gz`); output bounded per call."""

    def __init__(self, src: Readable, what: str) -> None:
        self._src, self._what = src, what
        self._d = _ZLIB.decompressobj(16 + zlib.MAX_WBITS)
        self._pending = b""
        self._eof = False

    def read(self, n: int = -1, /) -> bytes:
        n = CHUNK if n < 0 else n
        try:
            while True:
                if self._d.unconsumed_tail:
                    data = self._d.unconsumed_tail
                else:
                    if self._d.eof:
                        rest = self._d.unused_data or self._src.read(CHUNK)
                        while rest and not rest.strip(b"\0"):  # zero padding after the last member
                            rest = self._src.read(CHUNK)
                        if not rest:
                            return b""
                        self._d = _ZLIB.decompressobj(16 + zlib.MAX_WBITS)
                        data = rest
                    else:
                        data = self._src.read(CHUNK)
                        if not data:
                            raise InputError(f"{self._what} is truncated: the gzip stream ends before its last block")
                out: bytes = self._d.decompress(data, n)
                if out:
                    return out
        except _ZLIB_ERRORS as exc:
            raise InputError(f"{self._what} is not valid gzip: {exc}") from None


class Unzstd:
    def __init__(self, src: Readable, what: str) -> None:
        try:
            import zstandard
        except ImportError:
            raise InputError(
                f"{what} is zstd-compressed and the 'zstandard' package is not installed: pip install zstandard"
            ) from None
        self._what = what
        self._err = zstandard.ZstdError
        self._r = zstandard.ZstdDecompressor().stream_reader(src, read_size=CHUNK, read_across_frames=True)  # type: ignore[arg-type]

    def read(self, n: int = -1, /) -> bytes:
        try:
            return bytes(self._r.read(CHUNK if n < 0 else n))
        except self._err as exc:
            raise InputError(f"{self._what} is not valid zstd: {exc}") from None


class BombGuard:
    """Stops a layer whose uncompressed size runs past the image budget or an implausible ratio."""

    def __init__(self, src: Readable, compressed: Hashing | None, budget: list[int], limits: Limits, what: str) -> None:
        self._src, self._compressed, self._budget, self._limits, self._what = src, compressed, budget, limits, what
        self.count = 0

    def read(self, n: int = -1, /) -> bytes:
        data = self._src.read(n)
        self.count += len(data)
        self._budget[0] += len(data)
        lim = self._limits
        if self._budget[0] > lim.max_total_bytes:
            raise InputError(
                f"{self._what}: the image expands past {lim.max_total_bytes} bytes uncompressed "
                "(limit --max-bytes); a decompression bomb or an image larger than allowed"
            )
        if self._compressed is not None and self.count > lim.ratio_grace_bytes:
            ratio = self.count / max(1, self._compressed.count)
            if ratio > lim.max_ratio:
                raise InputError(
                    f"{self._what} expands {ratio:.0f}:1 ({self.count} bytes from {self._compressed.count}); "
                    f"real layers stay under {lim.max_ratio}:1, so this looks like a decompression bomb"
                )
        return data


class Peek:
    """Lets the caller look at the first bytes (compression magic) and then read from the start."""

    def __init__(self, src: Readable) -> None:
        self._src = src
        self._head = src.read(CHUNK)

    @property
    def head(self) -> bytes:
        return self._head

    def read(self, n: int = -1, /) -> bytes:
        if self._head:
            out = self._head if n < 0 or n >= len(self._head) else self._head[:n]
            self._head = self._head[len(out) :]
            return out
        return self._src.read(n)


def compression_of(head: bytes) -> str:
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return "none"


def decompressed(src: Readable, compression: str, what: str) -> Readable:
    if compression == "gzip":
        return Gunzip(src, what)
    if compression == "zstd":
        return Unzstd(src, what)
    return src


def scan_markers(chunks: Iterable[bytes], markers: tuple[bytes, ...]) -> set[bytes]:
    """Which of `markers` occur in the streamed content, also across chunk boundaries."""
    found: set[bytes] = set()
    overlap = max(len(m) for m in markers) - 1
    tail = b""
    for chunk in chunks:
        window = tail + chunk
        for m in markers:
            if m not in found and m in window:
                found.add(m)
        tail = window[-overlap:] if overlap else b""
    return found
