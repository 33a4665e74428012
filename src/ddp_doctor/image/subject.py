"""An image as a subject of the checks: every unit that names an `image` id, over the facts the audit
read, through the one registry (checks.registry.evaluate)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ddp_doctor.checks import registry
from ddp_doctor.report import Result

F = TypeVar("F")


@dataclass(frozen=True)
class ImageSubject:
    """The facts of `image.audit.facts_of`, read into each unit's typed facts by that type's
    `from_image` (a type without one is nothing an image can say: those units are left out)."""

    recorded: Mapping[str, Any]
    name: str = "image"

    def facts(self, kind: type[F]) -> F | None:
        read = getattr(kind, "from_image", None)
        return None if read is None else cast(F, read(self.recorded))

    def skipped(self, tags: frozenset[str]) -> str | None:
        return None


def evaluate(facts: Mapping[str, Any]) -> list[Result]:
    """Every check of an image, in the units' order."""
    return registry.evaluate(ImageSubject(facts))
