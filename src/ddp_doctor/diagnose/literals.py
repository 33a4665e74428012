"""Without RE2: find candidate lines by the literal text every match must contain.

Python's `re` tries each alternative of a big union at each position (well under 1 MB/s for
the catalogue's union); `bytes.find` runs at memory speed. So for each pattern we derive a set
of literals, one of which any match contains (from the parsed regex), and scan for those; the
matcher then applies the real patterns to the few lines found.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

try:
    sre_parse: Any = importlib.import_module("re._parser")  # Python >= 3.11
except ImportError:  # pragma: no cover - Python 3.10
    sre_parse = importlib.import_module("sre_parse")

_C = sre_parse  # opcodes are re-exported by the parser module
Needed = frozenset[tuple[str, bool]]
"""Alternatives (literal, case_insensitive): every match contains at least one of them."""


def _best(options: list[Needed]) -> Needed | None:
    options = [o for o in options if o]
    if not options:
        return None
    return max(options, key=lambda o: (min(len(t) for t, _ in o), -len(o)))


def _seq(items: object, ci: bool) -> Needed | None:
    options: list[Needed] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            options.append(frozenset({("".join(run), ci)}))
            run.clear()

    for op, av in items:  # type: ignore[attr-defined]
        if op is _C.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is _C.SUBPATTERN:
            _group, add, _del, sub = av
            inner = _seq(sub, ci or bool(add & re.IGNORECASE))
            if inner:
                options.append(inner)
        elif op is _C.BRANCH:
            alts = [_seq(b, ci) for b in av[1]]
            if all(alts):
                options.append(frozenset().union(*alts))  # type: ignore[arg-type]
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT) and av[0] >= 1:
            inner = _seq(av[2], ci)
            if inner:
                options.append(inner)
    flush()
    return _best(options)


def required(pattern: str) -> Needed | None:
    parsed = sre_parse.parse(pattern)
    return _seq(parsed, bool(parsed.state.flags & re.IGNORECASE))


@dataclass(frozen=True)
class _Match:
    pos: int

    def start(self) -> int:
        return self.pos


class LiteralFilter:
    """finditer() over bytes like a compiled regex, yielding the positions of required literals."""

    def __init__(self, needles: Sequence[tuple[str, bool]]) -> None:
        self.exact = sorted({t.encode() for t, ci in needles if not ci})
        self.folded = sorted({t.lower().encode() for t, ci in needles if ci})

    def finditer(self, region: bytes) -> Iterator[_Match]:
        found: list[int] = []
        for haystack, needles in ((region, self.exact), (region.lower() if self.folded else b"", self.folded)):
            for needle in needles:
                at = haystack.find(needle)
                while at >= 0:
                    found.append(at)
                    at = haystack.find(needle, at + 1)
        return (_Match(p) for p in sorted(set(found)))


def literal_filter(patterns: Sequence[str]) -> LiteralFilter | None:
    """None when some pattern requires no literal (then only a full regex scan is correct)."""
    needles: list[tuple[str, bool]] = []
    for p in patterns:
        need = required(p)
        if need is None:
            return None
        needles.extend(need)
    return LiteralFilter(needles)
