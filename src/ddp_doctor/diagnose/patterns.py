"""Every pattern the reader looks for, in one table, each with its owner; compiled once per engine.

Owners: a signature id (`diag.*`), `generic` (a line that looks like a failure), `structure`
(file headers, torchrun's summary, NCCL's rank announcements, "Last error:"), `fatal` (crash handlers'
announcements and backtrace frames, for fatal.py), `traceback` (Python tracebacks, for tracebacks.py),
`ends` (a process ending badly in any layer's words, readers.yaml ends_badly).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ddp_doctor.diagnose import catalogue, prefilter, readers, tracebacks
from ddp_doctor.diagnose.multimatch import Engine, compile_engine


@dataclass(frozen=True)
class PatternTable:
    patterns: tuple[str, ...]
    owners: tuple[str, ...]
    follow: dict[int, int]
    """Pattern index -> how many lines after its line the readers need (blockscan's context lines)."""
    once: frozenset[int]
    """Patterns whose line only the first time one process prints it matters (NCCL's rank announcement)."""
    precede: frozenset[int]
    """Patterns whose line the readers want with the line before it (a traceback's header: that line's time)."""
    cache: dict[frozenset[int], frozenset[str]]

    def owners_of(self, ids: frozenset[int]) -> frozenset[str]:
        found = self.cache.get(ids)
        if found is None:
            found = self.cache[ids] = frozenset(self.owners[i] for i in ids)
        return found


@functools.lru_cache(maxsize=1)
def table() -> PatternTable:
    patterns: list[str] = []
    owners: list[str] = []
    for sig in catalogue.load():
        for compiled in sig.patterns:
            patterns.append(compiled.pattern)
            owners.append(sig.id)
    patterns.append(prefilter.GENERIC_ERROR)
    owners.append("generic")
    for text in prefilter.STRUCTURE:
        patterns.append(text)
        owners.append("structure")
    for text in readers.load().fatal_patterns():
        patterns.append(text)
        owners.append("fatal")
    for text in tracebacks.PATTERNS:
        patterns.append(text)
        owners.append("traceback")
    for end in readers.load().ends_badly:
        patterns.append(end.pattern.pattern)
        owners.append("ends")
    follow = {i: 1 for i, p in enumerate(patterns) if p == prefilter.LAST_ERROR_PATTERN}
    follow[patterns.index(tracebacks.FRAME)] = tracebacks.FOLLOW_LINES
    once = frozenset({patterns.index(prefilter.NCCL_COMM_PATTERN)})
    precede = frozenset({patterns.index(tracebacks.HEADER)})
    return PatternTable(tuple(patterns), tuple(owners), follow, once, precede, {})


@functools.lru_cache(maxsize=4)
def engine(name: str | None = None) -> Engine:
    return compile_engine(table().patterns, name)
