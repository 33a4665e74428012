"""The checks of `check --static` on this host: every one a declared unit of checks/, run on typed
facts built from the facts dict of env.facts.gather() by the unit's `from_env` adapter.

Everything here works from the facts dict alone, so a facts file recorded on another machine
(a GPU node, an image) can be judged again: `evaluate(json.load(f)["facts"])`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ddp_doctor.checks import (
    container,
    dist_vars,
    distributed,
    driver_cuda,
    env_vars,
    gpu_arch,
    gpu_topology,
    gpus,
    gpus_busy,
    gpus_expected,
    nccl,
    network,
    numpy_import,
    official_build,
    python,
    shm,
    torch_build,
    torch_import,
    torchrun,
    ulimits,
    user,
)
from ddp_doctor.checks.dist_vars import DistVarsFacts
from ddp_doctor.checks.facts import NcclFacts, PythonFacts, ShmFacts, TorchFacts, TorchrunFacts, UserFacts
from ddp_doctor.checks.gpufacts import BusyFacts, ExpectedGpusFacts, GpuFacts, GpusFacts, TorchOnGpuFacts
from ddp_doctor.checks.hostfacts import ContainerFacts, EnvVarsFacts, NetworkFacts, UlimitsFacts
from ddp_doctor.checks.model import Check
from ddp_doctor.report import Result, Status

F = TypeVar("F")


@dataclass(frozen=True)
class OnHost(Generic[F]):
    """A unit of checks/ and the adapter that builds its facts from this host's facts dict."""

    check: Check[F]
    facts: Callable[[Mapping[str, Any]], F]

    @property
    def id(self) -> str:
        return self.check.id_for("env")

    def run(self, facts: Mapping[str, Any]) -> Result:
        return self.check.run(self.facts(facts), "env")


# The order is the report's (and tests/env/test_checks_facts.py's): python and torch first, then the
# GPUs, the system, the environment, the network, and the trust checks (expected GPUs, busy GPUs, distributed variables) last.
CHECKS: tuple[OnHost[Any], ...] = (
    OnHost(python.CHECK, PythonFacts.from_env),
    OnHost(torch_build.INSTALLED, TorchFacts.from_env),
    OnHost(torch_import.CHECK, TorchFacts.from_env),
    OnHost(torch_build.BUILD, TorchFacts.from_env),
    OnHost(numpy_import.CHECK, TorchFacts.from_env),
    OnHost(official_build.CHECK, TorchFacts.from_env),
    OnHost(distributed.CHECK, TorchFacts.from_env),
    OnHost(nccl.CHECK, NcclFacts.from_env),
    OnHost(torchrun.CHECK, TorchrunFacts.from_env),
    OnHost(gpus.CHECK, GpusFacts.from_env),
    OnHost(driver_cuda.CHECK, TorchOnGpuFacts.from_env),
    OnHost(gpu_arch.CHECK, TorchOnGpuFacts.from_env),
    OnHost(gpu_topology.CHECK, GpuFacts.from_env),
    OnHost(shm.CHECK, ShmFacts.from_env),
    OnHost(ulimits.CHECK, UlimitsFacts.from_env),
    OnHost(container.CHECK, ContainerFacts.from_env),
    OnHost(user.CHECK, UserFacts.from_env),
    OnHost(env_vars.CHECK, EnvVarsFacts.from_env),
    OnHost(network.CHECK, NetworkFacts.from_env),
    OnHost(gpus_expected.CHECK, ExpectedGpusFacts.from_env),
    OnHost(gpus_busy.CHECK, BusyFacts.from_env),
    OnHost(dist_vars.CHECK, DistVarsFacts.from_env),
)


TORCH_BUILD_CHECKS = frozenset({"env.torch.build", "env.official_build", "env.distributed", "env.nccl"})
"""The checks about the torch build alone; the image audit runs these over facts read from an image."""


OF_THE_ENVIRONMENT = frozenset(
    {
        "env.torch.installed",
        "env.torch.import",
        "env.torch.build",
        "env.numpy",
        "env.official_build",
        "env.distributed",
        "env.nccl",
        "env.torchrun",
        "env.driver_cuda",
        "env.gpu_arch",
    }
)
"""The checks about the training environment's own packages: with none found (env.python says so)
they would judge ddp-doctor's own environment and advise installing torch into it."""


def evaluate(facts: Mapping[str, Any], only: set[str] | frozenset[str] | None = None) -> list[Result]:
    """Run every static check over `facts`. A check whose facts are malformed (its adapter raises)
    or that breaks becomes an `error` Result, never a pass."""
    results = []
    no_environment = isinstance(facts.get("target"), Mapping) and facts["target"].get("source") == "none"
    for unit in CHECKS:
        if only is not None and unit.id not in only:
            continue
        if no_environment and unit.id in OF_THE_ENVIRONMENT:
            results.append(
                Result(unit.id, unit.check.title, Status.SKIP, "no training environment to examine (see env.python)")
            )
            continue
        try:
            results.append(unit.run(facts))
        except Exception as exc:  # noqa: BLE001 - a malformed facts file or the doctor's own bug: an unknown, not a pass
            results.append(
                Result(
                    unit.id,
                    unit.check.title,
                    Status.ERROR,
                    f"the check could not run: {type(exc).__name__}: {exc}",
                    cause="the facts were incomplete or malformed, or the check has a bug",
                )
            )
    return results
