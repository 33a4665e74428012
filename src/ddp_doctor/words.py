"""Small helpers for text a person reads: plurals, counts, numbers without float noise."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# A float printed with repr() noise: 2.8064999999999998, 0.30000000000000004 (10+ digits after the point).
_NOISY_FLOAT = re.compile(r"(?<![\w.])(\d+\.\d{10,})(?![\w.])")


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 check', '2 checks', '0 checks'; `many` for irregular words ('1 entry', '2 entries')."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def all_of(n: int, word: str, many: str | None = None) -> str:
    """'the only rank', 'both ranks', 'all 8 ranks'."""
    words = many or word + "s"
    return f"the only {word}" if n == 1 else f"both {words}" if n == 2 else f"all {n} {words}"


def count(value: object, word: str) -> str:
    """plural() for a number read from a file, which may be a count ('8', 8) or not ('all', '$GPUS')."""
    if isinstance(value, int) and not isinstance(value, bool):
        return plural(value, word)
    if isinstance(value, str) and value.isdigit():
        return plural(int(value), word)
    return f"{value} {word}s"


def ranks(numbers: Iterable[object]) -> str:
    """'rank 3', 'ranks 0 and 2', 'ranks 0, 1, 2 and 5': every rank named."""
    items = [str(n) for n in numbers]
    return ("rank " if len(items) == 1 else "ranks ") + listing(items, limit=max(1, len(items)))


def listing(items: Sequence[str], limit: int = 4) -> str:
    """'a', 'a and b', 'a, b and c', 'a, b, c, d and 3 more'."""
    items = list(items)
    if len(items) > limit:
        items = [*items[:limit], f"{len(items) - limit} more"]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def tidy_numbers(text: str) -> str:
    """Shorten float noise a formatter let through ('2.8064999999999998' -> '2.8065'): six significant
    digits are more than any measurement here means."""
    return _NOISY_FLOAT.sub(lambda m: f"{float(m.group(1)):.6g}", text)


def gbps(value: float) -> str:
    """A bandwidth in GB/s as every table, summary and headline prints it: two decimals, like nccl-tests'
    busbw column (rounded once, so a headline never says 1.42 where its table says 1.41)."""
    return f"{value:.2f}"


def human_bytes(n: float) -> str:
    """'512 B', '7.2 KiB', '1.5 GiB': a size as the screen shows it, in the unit that keeps it short."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
