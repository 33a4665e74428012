"""The check model: a check is a declared unit (name, title, the typed facts it needs, a pure judge).

The same unit judges this host (`check --static`), an image's rootfs (`image`) and, where a config
can say the same thing, a launch config (`lint`); each subject gathers the facts its own way and
names the Result with its own id prefix (`env.shm`, `image.user`). Wording, thresholds and
remedies come from the knowledge table (`checks/knowledge.yaml`, read by `checks.table`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from ddp_doctor.report import Result, Status

F = TypeVar("F")


@dataclass(frozen=True)
class Finding:
    """What a judge concludes; the Check turns it into the subject's Result."""

    status: Status
    summary: str
    """One line: what was observed against what was expected."""
    cause: str | None = None
    remedy: str | None = None
    observed: Mapping[str, Any] = field(default_factory=dict)
    expected: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Check(Generic[F]):
    """One declared check. `judge` is pure: typed facts in, a Finding out, no I/O."""

    name: str
    """Stable and dotted without the subject prefix (`shm`, `torch.build`)."""
    title: str
    facts: type[F]
    """The frozen facts record the judge reads (see checks.facts)."""
    judge: Callable[[F], Finding]
    ids: Mapping[str, str]
    """Subject -> Result id (`{"env": "env.shm"}`): the ids are the public, grep-able contract. A unit
    runs on the subjects named here and on no other."""
    order: int
    """Where its Result stands in a report, ascending; unique across the units (the registry refuses
    two alike). Gaps leave room for a new unit between two others."""
    tags: frozenset[str] = frozenset()
    """Groups a caller can ask for or a subject can skip: `torch_build` (the build of torch alone),
    `environment` (about the training environment's own packages)."""

    @property
    def doc(self) -> str:
        """The judge's docstring is the check's documentation (docs/checks.md is generated from it)."""
        return inspect.cleandoc(self.judge.__doc__ or "")

    def id_for(self, subject: str) -> str:
        return self.ids.get(subject) or f"{subject}.{self.name}"

    def run(self, facts: F, subject: str) -> Result:
        """Judge `facts` for `subject`; a judge that breaks is an `error` Result, never a pass."""
        rid = self.id_for(subject)
        try:
            found = self.judge(facts)
        except Exception as exc:  # noqa: BLE001 - a malformed facts file or our own bug: an unknown, not a pass
            return Result(
                rid,
                self.title,
                Status.ERROR,
                f"the check could not run: {type(exc).__name__}: {exc}",
                cause="the facts were incomplete or malformed, or the check has a bug",
            )
        return Result(
            rid,
            self.title,
            found.status,
            found.summary,
            cause=found.cause,
            remedy=found.remedy,
            observed=dict(found.observed),
            expected=dict(found.expected),
            metrics=dict(found.metrics),
        )


class Subject(Protocol):
    """What the checks judge: this host, an image's rootfs, a launch config's unit. It gives the
    facts of a kind, or None when it cannot say (a rootfs has no NVML): those units are left out."""

    @property
    def name(self) -> str:
        """The id prefix of its Results: `env`, `image`."""
        ...

    def facts(self, kind: type[F]) -> F | None:
        """The typed facts of `kind`; raises when its own record of them is malformed (an `error` Result)."""
        ...

    def skipped(self, tags: frozenset[str]) -> str | None:
        """Why a unit with these tags is a SKIP here (no training environment to examine), or None."""
        ...


def skip(why: str) -> Finding:
    return Finding(Status.SKIP, why)
