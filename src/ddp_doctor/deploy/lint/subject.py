"""A launch config's unit as a subject of the checks: where a lint rule judges what a host check
judges (the size of /dev/shm, a job that runs as root), the verdict is that unit's, reached through
the one registry like `check`'s and `image`'s; lint keeps its own rule ids, lines and wording."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ddp_doctor.checks import registry
from ddp_doctor.checks.facts.host import ShmFacts, UserFacts
from ddp_doctor.deploy.lint.model import Unit
from ddp_doctor.report import Result

F = TypeVar("F")


def _shm(u: Unit) -> ShmFacts | None:
    """Only a size the config states: a config that leaves /dev/shm to the runtime has lint's own
    rules (shm_default and friends), which weigh what the job runs."""
    if u.shm_bytes is None:
        return None
    gpus = u.gpus.value if u.gpus is not None else None
    return ShmFacts(size_bytes=u.shm_bytes, free_bytes=None, gpus=gpus)


def _user(u: Unit) -> UserFacts:
    if u.root is None:
        return UserFacts("the config", None, "", unknown_why="the config says nothing that makes it run as root")
    return UserFacts("the config", True, u.root.value, {"reason": u.root.value})


_READERS: Mapping[type, Callable[[Unit], Any]] = {ShmFacts: _shm, UserFacts: _user}


@dataclass(frozen=True)
class LaunchConfigSubject:
    """One unit of a launch config (a container, a compose service, a script's launch)."""

    unit: Unit
    name: str = "lint"

    def facts(self, kind: type[F]) -> F | None:
        read = _READERS.get(kind)
        return None if read is None else cast(F, read(self.unit))

    def skipped(self, tags: frozenset[str]) -> str | None:
        return None


def verdicts(u: Unit) -> dict[str, Result]:
    """The verdicts of the check units that judge a launch config, by unit name (`shm`, `user`); a
    unit the config gives no facts for is absent."""
    units = [unit for unit in registry.ALL if "lint" in unit.ids]
    names = {unit.id_for("lint"): unit.name for unit in units}
    return {names[r.id]: r for r in registry.evaluate(LaunchConfigSubject(u), units=units)}
