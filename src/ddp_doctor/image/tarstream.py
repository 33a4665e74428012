"""A streaming tar reader with no seeking, no disk and no trust in declared sizes.

`tarfile` in stream mode copies its whole buffer for every 512-byte header, which makes a layer of
many small files quadratic; this reader keeps one buffer and an offset. Header fields are parsed by
`tarfile.TarInfo.frombuf` (checksums, base-256 numbers); pax and GNU long names are applied here.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from dataclasses import dataclass

from ddp_doctor.errors import InputError
from ddp_doctor.image.streams import CHUNK, Readable

BLOCK = 512
# Data the member carries in the archive, by type; links, dirs and devices carry none.
_DATA_TYPES = {tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE}
_KNOWN = _DATA_TYPES | {
    tarfile.LNKTYPE,
    tarfile.SYMTYPE,
    tarfile.DIRTYPE,
    tarfile.CHRTYPE,
    tarfile.BLKTYPE,
    tarfile.FIFOTYPE,
}


@dataclass
class Member:
    name: str
    type: bytes
    size: int
    """Bytes of content that follow the header (0 for everything but regular files)."""
    mode: int
    uid: int
    linkname: str


class TarStream:
    def __init__(self, src: Readable, what: str, max_entry_bytes: int) -> None:
        self._src, self._what, self._max = src, what, max_entry_bytes
        self._buf = b""
        self._pos = 0
        self._left = 0  # content bytes of the current member not yet consumed
        self.count = 0

    def _fill(self, need: int) -> bool:
        have = len(self._buf) - self._pos
        parts = [self._buf[self._pos :]] if have else []
        while have < need:
            data = self._src.read(CHUNK)
            if not data:
                break
            parts.append(data)
            have += len(data)
        self._buf = b"".join(parts)
        self._pos = 0
        return have >= need

    def _take(self, n: int, context: str) -> bytes:
        if len(self._buf) - self._pos < n and not self._fill(n):
            raise InputError(f"{self._what} is truncated: {context}")
        out = self._buf[self._pos : self._pos + n]
        self._pos += n
        return out

    def _skip(self, n: int, context: str) -> None:
        have = len(self._buf) - self._pos
        if n <= have:
            self._pos += n
            return
        n -= have
        self._buf, self._pos = b"", 0
        while n > 0:
            data = self._src.read(min(CHUNK, n) if n < CHUNK else CHUNK)
            if not data:
                raise InputError(f"{self._what} is truncated: {context}")
            if len(data) > n:
                self._buf, self._pos = data, n
                return
            n -= len(data)

    def read_content(self, limit: int) -> bytes:
        """Up to `limit` bytes of the current member's content; the rest is skipped later."""
        n = min(limit, self._left)
        data = self._take(n, f"a member declares {self._left} bytes of content the stream does not hold")
        self._left -= n
        return data

    def content_chunks(self) -> Iterator[bytes]:
        while self._left > 0:
            have = len(self._buf) - self._pos
            if have == 0 and not self._fill(1):
                raise InputError(
                    f"{self._what} is truncated: a member declares {self._left} bytes the stream does not hold"
                )
            n = min(self._left, len(self._buf) - self._pos)
            chunk = self._buf[self._pos : self._pos + n]
            self._pos += n
            self._left -= n
            yield chunk

    def drain(self) -> None:
        self._buf, self._pos = b"", 0
        while self._src.read(CHUNK):
            pass

    def members(self) -> Iterator[Member]:
        """The members in order; pax and GNU long-name headers are folded into the member they precede."""
        long_name: str | None = None
        long_link: str | None = None
        pax: dict[str, str] = {}
        padding = 0
        while (info := self._header(padding)) is not None:
            size = info.size
            padding = -size % BLOCK
            if info.type in _EXTENDED:
                if size > 1 << 20:
                    raise InputError(
                        f"{self._what}: an extended header of {size} bytes; tar extended headers are small"
                    )
                data = self._take(size, "inside an extended header")
                self._take(padding, "inside an extended header")
                padding = 0
                if info.type == tarfile.GNUTYPE_LONGNAME:
                    long_name = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                elif info.type == tarfile.GNUTYPE_LONGLINK:
                    long_link = data.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                elif info.type == tarfile.XHDTYPE:
                    pax = _parse_pax(data, self._what)
                continue  # a global pax header (XGLTYPE) carries nothing the audit uses
            if info.type == tarfile.GNUTYPE_SPARSE:
                raise InputError(
                    f"{self._what}: entry {info.name[:200]!r} is a GNU sparse file, which image layers do not use"
                )
            name = pax.get("path") or long_name or info.name
            link = pax.get("linkpath") or long_link or info.linkname
            if "size" in pax:
                size = self._pax_size(pax["size"], name)
                padding = -size % BLOCK
            long_name = long_link = None
            pax = {}
            self.count += 1
            carries_data = info.type in _DATA_TYPES or info.type not in _KNOWN
            self._left = size if carries_data else 0
            padding = padding if carries_data else 0
            yield Member(name=name, type=info.type, size=size, mode=info.mode, uid=info.uid, linkname=link)

    def _header(self, padding: int) -> tarfile.TarInfo | None:
        """The next header, past the content and padding of the member before; None at the end."""
        if self._left or padding:
            self._skip(
                self._left + padding, f"a member declares {self._left} bytes of content the stream does not hold"
            )
            self._left = 0
        if len(self._buf) - self._pos < BLOCK and not self._fill(BLOCK):
            if len(self._buf) - self._pos == 0:
                return None  # EOF at a header boundary: an archive without its end blocks
            raise InputError(f"{self._what} is truncated inside a tar header")
        block = self._take(BLOCK, "inside a tar header")
        if block == bytes(BLOCK):
            return None
        try:
            info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
        except tarfile.HeaderError as exc:
            raise InputError(f"{self._what} is not a valid tar stream: {exc} (at entry {self.count + 1})") from None
        if info.size < 0 or info.size > self._max:
            raise InputError(
                f"{self._what}: entry {info.name[:200]!r} declares {info.size} bytes, over the limit of "
                f"{self._max} bytes per entry (--max-entry-bytes)"
            )
        return info

    def _pax_size(self, text: str, name: str) -> int:
        try:
            size = int(text)
        except ValueError:
            raise InputError(f"{self._what}: pax size {text[:40]!r} is not a number") from None
        if size < 0 or size > self._max:
            raise InputError(
                f"{self._what}: entry {name[:200]!r} declares {size} bytes, over the limit of "
                f"{self._max} bytes per entry (--max-entry-bytes)"
            )
        return size


_EXTENDED = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE)


def _parse_pax(data: bytes, what: str) -> dict[str, str]:
    """`LEN key=value\\n` records; a record whose length does not add up is an error, not a guess."""
    out: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        if data[pos:].strip(b"\0") == b"":
            break
        space = data.find(b" ", pos)
        try:
            length = int(data[pos:space]) if space > pos else -1
        except ValueError:
            length = -1
        if length <= 0 or pos + length > len(data) or data[pos + length - 1 : pos + length] != b"\n":
            raise InputError(f"{what}: a malformed pax extended header")
        record = data[space + 1 : pos + length - 1]
        key, sep, value = record.partition(b"=")
        if not sep:
            raise InputError(f"{what}: a malformed pax extended header")
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "surrogateescape")
        pos += length
    return out
