"""Is this a log at all? Asked before explain reads it, so that an empty file, a device, random bytes
or an archive that is not a log is an input error (exit 2) instead of "no known failure signature in
3849 lines" (a PASS over something that was never a log).

`refuse_path` looks at what the path is (a character or block device never ends or is no log: /dev/zero,
a disk); `checked` reads the first SAMPLE bytes of the unpacked stream, judges them, and hands back a
stream that yields those bytes again and then the rest, so nothing is read twice.
"""

from __future__ import annotations

import io
import os
import stat
from typing import IO, cast

from ddp_doctor.diagnose.logread import _read
from ddp_doctor.errors import InputError

SAMPLE = 64 << 10
TEXT_SHARE = 0.75
"""Below this share of text bytes (after NUL runs are left out) the head is binary: random bytes are
about 40% printable, a log with ANSI colours, carriage-return progress bars and some Latin-1 well
above 95%."""
EXPECTED = "expected the output of torchrun, NCCL_DEBUG, kubectl logs or a training job"
_TEXT = bytes(range(0x20, 0x7F)) + b"\t\n\r\x1b\x08\x0c"
_ASCII = bytes(range(0x80))


def refuse_path(path: str) -> None:
    """An InputError when `path` is a device or an empty regular file ('-' is stdin: judged by content)."""
    if path == "-":
        return
    try:
        st = os.stat(path)
    except OSError:
        return  # opening it says why, in the reader's words
    kind = "a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode) else None
    if kind:
        raise InputError(f"{path} is {kind}, not a log file; {EXPECTED} (a file, or '-' for stdin)")
    if stat.S_ISREG(st.st_mode) and st.st_size == 0:
        raise InputError(f"{path} is empty: there is no log to explain")


def checked(stream: IO[bytes], name: str) -> IO[bytes]:
    """The same content as `stream`, once its head has been judged to be text (else an InputError)."""
    head = _read(stream, SAMPLE, name)
    judge(head, name)
    return cast(IO[bytes], _Replay(head, stream))


def judge(head: bytes, name: str) -> None:
    """An InputError when the first bytes of a log are none, only NULs, or mostly not text."""
    if not head:
        raise InputError(f"{name} is empty: there is no log to explain")
    rest = head.replace(b"\0", b"")
    if not rest:
        raise InputError(f"{name} holds only NUL bytes, not a log; {EXPECTED}")
    share = _text_bytes(rest) / len(rest)
    if share < TEXT_SHARE:
        raise InputError(
            f"{name} is not a log: {100 - round(share * 100)}% of its first {len(head) >> 10 or 1} KiB is binary, "
            f"not text; {EXPECTED}"
        )


def _text_bytes(data: bytes) -> int:
    """Printable ASCII and the control characters logs use, plus the bytes of valid UTF-8 sequences."""
    ascii_text = len(data) - len(data.translate(None, _TEXT))
    high = len(data.translate(None, _ASCII))
    if not high:
        return ascii_text
    decoded = data.decode("utf-8", "replace")
    invalid = decoded.count("\ufffd") - data.count("\ufffd".encode())  # bytes that were not UTF-8
    return ascii_text + max(0, high - invalid)


class _Replay(io.RawIOBase):
    """`head`, then whatever `rest` still has: the judged bytes are read once."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        super().__init__()
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)
