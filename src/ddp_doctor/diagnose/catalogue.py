"""The signature catalogue: load catalogue.yaml, validate every entry, compile its patterns.

The catalogue is data, so adding a failure signature is an edit to the YAML, its examples
and (for docs) a regenerate; the engine never needs to know a signature by name.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from ddp_doctor.report import Status

TIERS = ("cause", "symptom", "cascade", "harmless")
"""cause: a failure in its own right; symptom: usually the consequence of a failure elsewhere
(a timeout waiting for a dead rank); cascade: what the launcher prints after any failure;
harmless: a line that looks worrying in a run that works (its `unless` says when it is not)."""
READERS = ("hang", "fatal_signal", "p2p_tables", "nccl_tests_ranks")
"""Findings read from what a log does not say line by line (hang.py, fatal.py): no patterns of their own."""


@dataclass(frozen=True)
class Hypothesis:
    cause: str
    test: str
    """The experiment that tells this hypothesis apart from the others."""


_REQUIRED = ("id", "title", "severity", "tier", "cause", "remedy", "sources")


@dataclass(frozen=True)
class Signature:
    id: str
    title: str
    severity: Status
    tier: str
    cause: str
    remedy: str
    sources: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()
    signals: tuple[int, ...] = ()
    """Exit statuses meaning 'killed by this signal' (-N from Python, 128+N from a shell)."""
    examples: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unless: str = ""
    """For a harmless line: the condition under which it is not harmless."""
    reader: str = ""
    """For a finding no pattern can make (a hang, a fatal-signal backtrace): the module that reads it."""
    hypotheses: dict[str, tuple[Hypothesis, ...]] = field(default_factory=dict)
    """Ranked likely causes with the test that tells them apart, keyed by situation (e.g. a hang's stage)."""
    fail_after: int = 0
    """For a warning that is harmless once but not when it repeats (a retry): FAIL from this many lines on."""

    def status_for(self, count: int) -> Status:
        """The severity of `count` matching lines."""
        return Status.FAIL if self.fail_after and count >= self.fail_after else self.severity

    @property
    def rank_of_tier(self) -> int:
        return TIERS.index(self.tier)

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns) and not any(p.search(text) for p in self.exclude)


class CatalogueError(ValueError):
    pass


def _compile(entry_id: str, patterns: Any) -> tuple[re.Pattern[str], ...]:
    if patterns is None:
        return ()
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise CatalogueError(f"{entry_id}: patterns must be a list of strings")
    out = []
    for p in patterns:
        try:
            out.append(re.compile(p))
        except re.error as exc:
            raise CatalogueError(f"{entry_id}: bad pattern {p!r}: {exc}") from None
    return tuple(out)


def _hypotheses(sid: str, raw: Any) -> dict[str, tuple[Hypothesis, ...]]:
    if not raw:
        return {}
    if not isinstance(raw, dict):
        raise CatalogueError(f"{sid}: hypotheses must map a situation to a list of {{cause, test}}")
    out = {}
    for situation, items in raw.items():
        if not isinstance(items, list) or not all(
            isinstance(h, dict) and h.get("cause") and h.get("test") for h in items
        ):
            raise CatalogueError(f"{sid}: hypotheses[{situation}] must be a list of {{cause, test}}")
        out[str(situation)] = tuple(
            Hypothesis(" ".join(str(h["cause"]).split()), " ".join(str(h["test"]).split())) for h in items
        )
    return out


def parse(entries: Any) -> tuple[Signature, ...]:
    if not isinstance(entries, list):
        raise CatalogueError("the catalogue must be a list of signatures")
    seen: set[str] = set()
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise CatalogueError(f"catalogue entry is not a mapping: {entry!r}")
        missing = [k for k in _REQUIRED if not entry.get(k)]
        sid = str(entry.get("id", "?"))
        if missing:
            raise CatalogueError(f"{sid}: missing {', '.join(missing)}")
        if not sid.startswith("diag.") or sid in seen:
            raise CatalogueError(f"{sid}: ids are unique and start with 'diag.'")
        seen.add(sid)
        if entry["tier"] not in TIERS:
            raise CatalogueError(f"{sid}: tier must be one of {TIERS}")
        harmless = entry["tier"] == "harmless"
        if entry["severity"] not in (("pass",) if harmless else ("fail", "warn")):
            raise CatalogueError(f"{sid}: severity must be fail or warn (pass for a harmless line)")
        if harmless and not entry.get("unless"):
            raise CatalogueError(f"{sid}: a harmless line needs 'unless' (when it is not harmless)")
        patterns = _compile(sid, entry.get("patterns"))
        signals = tuple(int(s) for s in entry.get("signals") or ())
        reader = str(entry.get("reader") or "")
        if reader and reader not in READERS:
            raise CatalogueError(f"{sid}: reader must be one of {READERS}")
        if not patterns and not signals and not reader:
            raise CatalogueError(f"{sid}: needs patterns or signals")
        examples = {k: tuple(v) for k, v in (entry.get("examples") or {}).items()}
        out.append(
            Signature(
                id=sid,
                title=entry["title"],
                severity=Status(entry["severity"]),
                tier=entry["tier"],
                cause=" ".join(str(entry["cause"]).split()),
                remedy=str(entry["remedy"]).strip(),
                sources=tuple(entry["sources"]),
                patterns=patterns,
                exclude=_compile(sid, entry.get("exclude")),
                signals=signals,
                examples=examples,
                unless=" ".join(str(entry.get("unless") or "").split()),
                reader=reader,
                hypotheses=_hypotheses(sid, entry.get("hypotheses")),
                fail_after=int(entry.get("fail_after") or 0),
            )
        )
    return tuple(out)


@functools.lru_cache(maxsize=1)
def load() -> tuple[Signature, ...]:
    text = resources.files("ddp_doctor.diagnose").joinpath("catalogue.yaml").read_text(encoding="utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster start-up
    return parse(yaml.load(text, Loader=loader))


def by_id() -> dict[str, Signature]:
    return {s.id: s for s in load()}
