"""Every pattern the reader looks for, in one table, each with its owner; compiled once per engine.

Owners: a signature id (`diag.*`), `generic` (a line that looks like a failure), `structure`
(file headers, torchrun's summary, NCCL's rank announcements, "Last error:"), `fatal` (crash handlers'
announcements and backtrace frames, for fatal.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ddp_doctor.diagnose import catalogue, prefilter, readers
from ddp_doctor.diagnose.multimatch import Engine, compile_engine


@dataclass(frozen=True)
class PatternTable:
    patterns: tuple[str, ...]
    owners: tuple[str, ...]

    def owners_of(self, ids: frozenset[int]) -> frozenset[str]:
        return frozenset(self.owners[i] for i in ids)


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
    return PatternTable(tuple(patterns), tuple(owners))


@functools.lru_cache(maxsize=4)
def engine(name: str | None = None) -> Engine:
    return compile_engine(table().patterns, name)
