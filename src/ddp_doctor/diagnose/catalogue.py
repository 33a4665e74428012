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

TIERS = ("cause", "symptom", "cascade")
"""cause: a failure in its own right; symptom: usually the consequence of a failure elsewhere
(a timeout waiting for a dead rank); cascade: what the launcher prints after any failure."""

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

    @property
    def rank_of_tier(self) -> int:
        return TIERS.index(self.tier)

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns) and not any(p.search(text) for p in self.exclude)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "severity": self.severity.value,
            "tier": self.tier,
            "cause": self.cause,
            "remedy": self.remedy,
            "sources": list(self.sources),
            "patterns": [p.pattern for p in self.patterns],
            "exclude": [p.pattern for p in self.exclude],
            "signals": list(self.signals),
        }


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
        if entry["severity"] not in ("fail", "warn"):
            raise CatalogueError(f"{sid}: severity must be fail or warn")
        patterns = _compile(sid, entry.get("patterns"))
        signals = tuple(int(s) for s in entry.get("signals") or ())
        if not patterns and not signals:
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
