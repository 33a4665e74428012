"""One compiled multi-pattern matcher over every pattern the reader looks for, run on whole blocks.

Three engines, best first; all find the same lines (tests/diagnose/test_engines.py):
  hyperscan  Intel's SIMD multi-regex engine: all patterns in one pass at ~GB/s, each hit with its id.
  re2        google-re2: the union as one DFA finds the hit positions; a `re2.Set` says which patterns a
             hit line matches.
  re         the standard library: the literal every match must contain (`bytes.find`, memory speed)
             finds candidate lines, each pattern's own regex confirms them (correct, slower).
`DDP_DOCTOR_REGEX=re2|re` forces an engine (benchmarks, tests).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, Protocol

from ddp_doctor.diagnose import dbcache
from ddp_doctor.diagnose.literals import literal_filter, required
from ddp_doctor.diagnose.prefilter import scoped

_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")


class Engine(Protocol):
    name: str

    def positions(self, block: bytes | memoryview) -> list[int]:
        """Sorted offsets, one inside each match in the block (several may share a line)."""
        ...

    def which(self, line: bytes) -> frozenset[int]:
        """Indexes of the patterns that match this one line."""
        ...

    def hits(self, block: bytes | memoryview) -> list[tuple[int, int]]:
        """(offset inside a match, pattern index) sorted by offset; index UNKNOWN when the engine cannot say
        without a second look at the line (then `which` tells)."""
        ...


UNKNOWN = -1
GAP_LITERAL = 12
"""Shortest literal hyperscan looks for in place of a pattern with an unbounded gap (see `gap_literal`)."""
_GAP = re.compile(r"\.[*+]")


def _split_flags(pattern: str) -> tuple[str, bool]:
    m = _FLAGS.match(pattern)
    if m:
        return pattern[m.end() :], "i" in m.group(1)
    return pattern, False


def gap_literal(pattern: str) -> tuple[str, bool] | None:
    """For a pattern with an unbounded gap (`A.*B`): the one literal every match holds, when it is long enough
    to be rare on a healthy line; else None. Hyperscan follows such a gap to the end of every line that starts
    like the pattern (`Channel \\d+/\\d+ : .* via NET/Socket` on each of NCCL's many healthy channel lines);
    looking for the literal instead and confirming the line with the pattern finds the same lines."""
    if not _GAP.search(pattern):
        return None
    need = required(pattern)
    if not need or len(need) != 1:
        return None
    (literal, ci) = next(iter(need))
    return (literal, ci) if len(literal) >= GAP_LITERAL else None


class _Hyperscan:
    name = "hyperscan"

    def __init__(self, patterns: Sequence[str]) -> None:
        import hyperscan

        exprs, flags = [], []
        self._confirm: dict[int, re.Pattern[bytes]] = {}
        for i, p in enumerate(patterns):
            body, ci = _split_flags(p)
            gap = gap_literal(p)
            if gap is not None:
                self._confirm[i] = re.compile(p.encode(), re.MULTILINE)
                body, ci = re.escape(gap[0]), gap[1]
            exprs.append(body.encode())
            flags.append(hyperscan.HS_FLAG_MULTILINE | (hyperscan.HS_FLAG_CASELESS if ci else 0))
        self._db = _cached_db(hyperscan, exprs, flags)

    def positions(self, block: bytes | memoryview) -> list[int]:
        return [p for p, _ in self.hits(block)]

    def hits(self, block: bytes | memoryview) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        add = found.append

        def on_match(pid: int, _start: int, end: int, _flags: int, _ctx: object) -> None:
            add((end - 1 if end > 0 else 0, pid))  # the match's last byte lies on its line

        self._db.scan(block, match_event_handler=on_match)
        found.sort()
        if self._confirm and any(pid in self._confirm for _, pid in found):
            found = self._confirmed(bytes(block), found)
        return found

    def _confirmed(self, data: bytes, found: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Drop the hits of a gap pattern's literal on lines the pattern itself does not match."""
        kept, verdict = [], {}
        for pos, pid in found:
            check = self._confirm.get(pid)
            if check is not None:
                ls = data.rfind(b"\n", 0, pos) + 1
                if (ls, pid) not in verdict:
                    le = data.find(b"\n", pos)
                    verdict[(ls, pid)] = check.search(data, ls, len(data) if le < 0 else le) is not None
                if not verdict[(ls, pid)]:
                    continue
            kept.append((pos, pid))
        return kept

    def which(self, line: bytes) -> frozenset[int]:
        ids: set[int] = set()

        def on_match(pid: int, _start: int, _end: int, _flags: int, _ctx: object) -> None:
            ids.add(pid)

        self._db.scan(line, match_event_handler=on_match)
        return frozenset(i for i in ids if i not in self._confirm or self._confirm[i].search(line))


def _cached_db(hyperscan: Any, exprs: list[bytes], flags: list[int]) -> Any:
    """Compiling the catalogue takes ~0.4 s, a third of reading 500 MB: keep the compiled database in the
    user's cache (dbcache.py), keyed by the patterns, the library version and the CPU's SIMD features. The
    cache is only an optimisation: a missing, torn, stale or unwritable one means compiling again."""
    key = dbcache.key_of((exprs, flags, hyperscan.__version__, dbcache.cpu_features()))
    payload = dbcache.load(key)
    if payload is not None:
        try:
            loaded = hyperscan.loadb(payload, mode=hyperscan.HS_MODE_BLOCK)
            loaded.scratch = hyperscan.Scratch(loaded)  # a deserialised database comes without one
            return loaded
        except hyperscan.error:
            pass  # built for another CPU (hyperscan checks): compiled below, and the entry replaced
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=flags)
    try:
        dbcache.store(key, hyperscan.dumpb(db))
    except OSError:
        pass  # a read-only home: every run compiles, which is correct, only slower
    return db


class _Re2:
    name = "re2"

    def __init__(self, patterns: Sequence[str]) -> None:
        import re2

        options = re2.Options()
        options.encoding = re2.Options.Encoding.LATIN1  # bytes are bytes: invalid UTF-8 cannot break the scan
        options.max_mem = 256 << 20
        options.never_capture = True
        options.posix_syntax = False
        self._union = re2.compile("|".join(f"(?m:{scoped(p)})" for p in patterns).encode(), options)
        self._set = re2.Set.SearchSet(options)
        for p in patterns:
            self._set.Add(scoped(p).encode())
        self._set.Compile()

    def positions(self, block: bytes | memoryview) -> list[int]:
        return [m.start() for m in self._union.finditer(block)]

    def which(self, line: bytes) -> frozenset[int]:
        # RE2's Set answers None, not an empty list, where the union matched a line alone (a pattern anchored at
        # the end of a line the union saw before its newline): no pattern of the set holds the line by itself.
        return frozenset(self._set.Match(line) or ())

    def hits(self, block: bytes | memoryview) -> list[tuple[int, int]]:
        return [(p, UNKNOWN) for p in self.positions(block)]


class _Re:
    name = "re"

    def __init__(self, patterns: Sequence[str]) -> None:

        self._each = [re.compile(p.encode(), re.MULTILINE) for p in patterns]
        self._literal = literal_filter(patterns)
        self._union = (
            None if self._literal else re.compile(b"|".join(scoped(p).encode() for p in patterns), re.MULTILINE)
        )

    def positions(self, block: bytes | memoryview) -> list[int]:
        block = bytes(block)
        if self._literal is not None:
            return [h.start() for h in self._literal.finditer(block)]
        assert self._union is not None
        return [m.start() for m in self._union.finditer(block)]

    def which(self, line: bytes) -> frozenset[int]:
        return frozenset(i for i, p in enumerate(self._each) if p.search(line))

    def hits(self, block: bytes | memoryview) -> list[tuple[int, int]]:
        return [(p, UNKNOWN) for p in self.positions(block)]


def available() -> list[str]:
    names = []
    for name, module in (("hyperscan", "hyperscan"), ("re2", "re2")):
        try:
            __import__(module)
        except ImportError:
            continue
        names.append(name)
    return [*names, "re"]


def default_engine() -> str:
    forced = os.environ.get("DDP_DOCTOR_REGEX")
    names = available()
    if forced in names:
        return forced
    return names[0]


def compile_engine(patterns: Sequence[str], engine: str | None = None) -> Engine:
    name = engine or default_engine()
    cls: Any = {"hyperscan": _Hyperscan, "re2": _Re2, "re": _Re}[name]
    result: Engine = cls(patterns)
    return result
