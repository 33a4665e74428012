"""This host as a subject of the checks: the facts dict of env.facts.gather(), read into each unit's
typed facts by that type's own `from_env`.

Everything here works from the facts dict alone, so a facts file recorded on another machine
(a GPU node, an image) can be judged again: `evaluate(json.load(f)["facts"])`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ddp_doctor.checks import registry
from ddp_doctor.report import Result

F = TypeVar("F")

NO_ENVIRONMENT = "no training environment to examine (see env.python)"


@dataclass(frozen=True)
class HostSubject:
    """This host (or a report's recorded facts of one). Units tagged `environment` are a SKIP when no
    training environment was found: they would judge ddp-doctor's own environment and advise
    installing torch into it."""

    recorded: Mapping[str, Any]
    name: str = "env"

    def facts(self, kind: type[F]) -> F | None:
        read = getattr(kind, "from_env", None)
        return None if read is None else cast(F, read(self.recorded))

    def skipped(self, tags: frozenset[str]) -> str | None:
        target = self.recorded.get("target")
        no_environment = isinstance(target, Mapping) and target.get("source") == "none"
        return NO_ENVIRONMENT if no_environment and "environment" in tags else None


def evaluate(facts: Mapping[str, Any], tags: set[str] | frozenset[str] | None = None) -> list[Result]:
    """Run every unit that judges a host over `facts` (those with one of `tags`, when given)."""
    return registry.evaluate(HostSubject(facts), tags)
