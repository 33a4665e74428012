"""The flags every command shares: the output flags (cli renders with them), and the one parse-time
type for numeric flags, so a bad number is refused by argparse (one line, exit 2) before any work."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from ddp_doctor.render import FORMATS, PIPED_WIDTH

WEEK_S = 7 * 24 * 3600
"""The longest deadline any flag takes: past a week a deadline is a typo, and `inf` or 1e300 would
overflow the clocks it is added to."""


@dataclass(frozen=True)
class Number:
    """An argparse `type=` for a numeric flag: finite, within [low, high] (`low` excluded when
    `above`), the range named in the error. `whole` numbers are ints."""

    what: str
    """The unit in words, for the error: 'seconds', 'ranks', 'MB'."""
    low: float
    high: float
    whole: bool = False
    above: bool = False
    """`low` itself is refused (a deadline of 0 s)."""

    def describe(self) -> str:
        low = f"> {self.low:g}" if self.above else f">= {self.low:g}"
        kind = "a whole number of " if self.whole else ""
        return f"{kind}{self.what} {low} and <= {self.high:g}"

    def __call__(self, text: str) -> int | float:
        value: int | float
        try:
            value = int(text, 10) if self.whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"got {text!r}; expected {self.describe()}") from None
        if not math.isfinite(value) or value > self.high or value < self.low or (self.above and value == self.low):
            raise argparse.ArgumentTypeError(f"got {text!r}; expected {self.describe()}")
        return value


def seconds(low: float = 0.0, high: float = WEEK_S) -> Number:
    """A deadline or interval: > 0 s (or >= `low` when `low` is not 0, e.g. a rate that 0 turns off)."""
    return Number("seconds", low, high, above=low == 0.0)


def count(what: str, low: int, high: int) -> Number:
    return Number(what, low, high, whole=True)


PORT = count("a TCP port", 1, 65535)
MAX_RANKS = 4096
"""The most ranks per node any flag takes; the machine's own bound (cores, GPUs, memory) is
checked before launch (live/capacity.py)."""


def add_oversubscribe_argument(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--oversubscribe",
        action="store_true",
        help="allow more ranks than CPU cores (gloo) or GPUs (NCCL); still refused past what memory holds",
    )


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(i?[bB])?\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@dataclass(frozen=True)
class Size:
    """An argparse `type=` for a byte size: '1024', '64K', '16M', '1.5G', '20GiB' (powers of 1024, as
    nccl-tests' -b/-e and docker read them), within [low, high]."""

    low: int
    high: int

    def describe(self) -> str:
        return f"a size such as 1024, 64K, 16M or 1G, from {_human(self.low)} to {_human(self.high)}"

    def __call__(self, text: str) -> int:
        m = _SIZE.match(text)
        value = int(float(m.group(1)) * _UNITS[m.group(2).lower()]) if m else None
        if value is None or not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"got {text!r}; expected {self.describe()}")
        return value


def _human(n: int) -> str:
    for unit, size in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def add_output_arguments(parser: argparse.ArgumentParser, formats: Sequence[str] = FORMATS) -> None:
    parser.add_argument("--format", choices=list(formats), default="text", help="report format (default: text)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument("--strict", action="store_true", help="treat warnings as failures (exit 1)")
    parser.add_argument("--verbose", "-v", action="store_true", help="text: every rank's row and every sub-check")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress display on stderr")


def use_color(output: str | None) -> bool:
    if "NO_COLOR" in os.environ or (output not in (None, "-")):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout is not None and sys.stdout.isatty()


def text_width(output: str | None, stream: TextIO | None = None) -> int:
    """The columns the text report is laid out for: $COLUMNS when set (as shutil.get_terminal_size
    reads it), else the terminal's when the report goes to one, else the piped width (a file, a pipe,
    CI logs). `stream`: where the report goes when there is no --output (stdout; stderr for `run`)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = stream if stream is not None else sys.stdout
    if output not in (None, "-") or stream is None or not stream.isatty():
        return PIPED_WIDTH
    try:
        return os.get_terminal_size(stream.fileno()).columns or PIPED_WIDTH
    except (OSError, ValueError):
        return PIPED_WIDTH
