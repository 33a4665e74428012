"""Read a file the user named as input under a size bound: a device (/dev/zero never ends), a FIFO
that never stops or a file larger than the bound is one InputError, never the machine's memory.

Used where a command reads a whole small file (render's report, bench's --baseline and --import);
explain, image and lint have their own streaming readers with their own bounds.
"""

from __future__ import annotations

import os
import stat
import sys

from ddp_doctor.errors import InputError


def read_bounded(path: str, limit: int, expected: str, label: str = "") -> bytes:
    """The bytes of `path` ('-' is stdin), at most `limit`. `expected` says what the file should be
    ("a JSON report ..."), `label` names the flag it came from in "cannot read" ("baseline ")."""
    if path == "-":
        data = sys.stdin.buffer.read(limit + 1) if sys.stdin is not None else b""
        return _within(data, "stdin", limit, expected)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read {label}{path}: {exc.strerror or exc}") from None
    kind = _KINDS.get(stat.S_IFMT(st.st_mode))
    if kind:
        raise InputError(f"{path} is {kind}, not a file to read; expected {expected}")
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read {label}{path}: {exc.strerror or exc}") from None
    return _within(data, path, limit, expected)


_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFDIR: "a directory"}
"""What is refused before reading: a device never ends or is a disk, a directory is not a file. A FIFO
is read (`render <(zcat report.json.gz)`), under the bound."""


def _within(data: bytes, name: str, limit: int, expected: str) -> bytes:
    if len(data) > limit:
        raise InputError(f"{name} is larger than {limit >> 20} MiB; expected {expected}")
    return data
