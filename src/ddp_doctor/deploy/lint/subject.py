"""A launch config's unit as a subject of the checks: where a lint rule judges what a host check
judges (the size of /dev/shm, a job that runs as root, the variables the ranks start with), the
verdict is that unit's, reached through the one registry like `check`'s and `image`'s; lint keeps its
own rule ids, lines and wording around it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ddp_doctor.checks import registry
from ddp_doctor.checks.facts.host import EnvVarsFacts, ShmFacts, UserFacts, VariableContext, dist_env
from ddp_doctor.checks.variables import VariableVerdict
from ddp_doctor.deploy.lint.infer import workload
from ddp_doctor.deploy.lint.model import At, Unit
from ddp_doctor.report import Result, Status

F = TypeVar("F")

RANK_SETTERS = ("torchrun", "tune", "accelerate", "deepspeed", "ddp-doctor", "mpirun")
"""Launchers that set RANK / WORLD_SIZE for every rank they start."""
RANK_SETTING_OPERATORS = ("pytorchjob", "trainjob")
_NCCL_RUNS = {"gpu": True, "cpu": False}
"""A GPU job runs NCCL, a CPU job does not; a config that does not say leaves it unknown."""


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


def exports(u: Unit) -> dict[str, At[str]]:
    """The variables the unit's ranks start with: its env, then what the starting command adds
    (`srun --export`, `mpirun -x NAME=VALUE`)."""
    env = dict(u.env)
    for launch in u.launches:
        env.update(launch.exports)
    return env


def _env_vars(u: Unit) -> EnvVarsFacts | None:
    """The variables the ranks start with, read as a host's and an image's are (checks.facts.host.dist_env),
    weighed against what the config says the job is: NCCL runs in a GPU job, and a launcher or
    operator that sets RANK / WORLD_SIZE makes those its own. The interfaces and the NCCL are the node's."""
    env = dist_env({k: v.value for k, v in exports(u).items()})
    if not env:
        return None
    w = workload(u)
    sets_ranks = any(launch.tool in RANK_SETTERS for launch in u.launches) or u.operator in RANK_SETTING_OPERATORS
    where = VariableContext(
        nccl_runs=_NCCL_RUNS.get(w.device.value) if w.device is not None else None,
        rank_setter=True if sets_ranks else None,
    )
    return EnvVarsFacts(env, where, every_variable=True)


_READERS: Mapping[type, Callable[[Unit], Any]] = {ShmFacts: _shm, UserFacts: _user, EnvVarsFacts: _env_vars}


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
    """The verdicts of the check units that judge a launch config, by unit name (`shm`, `user`,
    `env_vars`); a unit the config gives no facts for is absent."""
    units = [unit for unit in registry.ALL if "lint" in unit.ids]
    names = {unit.id_for("lint"): unit.name for unit in units}
    return {names[r.id]: r for r in registry.evaluate(LaunchConfigSubject(u), units=units)}


def variable_verdicts(said: Result) -> list[VariableVerdict]:
    """The one verdict per variable behind the env_vars unit's Result. A unit that could not judge is
    our own defect: raised, never read as "nothing to say"."""
    if said.status is Status.ERROR:
        raise RuntimeError(f"{said.id}: {said.summary}")
    return [VariableVerdict.from_dict(v) for v in said.observed.get("verdicts") or []]
