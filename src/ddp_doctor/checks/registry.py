"""The one registry of checks and `evaluate(subject)` over it."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

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
from ddp_doctor.checks.model import Check, Subject
from ddp_doctor.report import Result, Status

ALL: tuple[Check[Any], ...] = (
    python.CHECK,
    torch_build.INSTALLED,
    torch_import.CHECK,
    torch_build.BUILD,
    numpy_import.CHECK,
    official_build.CHECK,
    distributed.CHECK,
    nccl.CHECK,
    torchrun.CHECK,
    gpus.CHECK,
    driver_cuda.CHECK,
    gpu_arch.CHECK,
    gpu_topology.CHECK,
    shm.CHECK,
    ulimits.CHECK,
    container.CHECK,
    user.CHECK,
    env_vars.CHECK,
    network.CHECK,
    gpus_expected.CHECK,
    gpus_busy.CHECK,
    dist_vars.CHECK,
)


def evaluate(subject: Subject, tags: AbstractSet[str] | None = None) -> list[Result]:
    """Every unit of ALL that runs on `subject` (and has one of `tags`, when given), in ALL's order.

    A unit the subject has no facts for is left out; one whose facts are malformed or whose judge
    breaks is an `error` Result, never a pass. One Result per id: two units may answer one id on a
    subject (`image.torch` is whether torch is installed, then its build), and a later unit that
    skips leaves the earlier verdict in place.
    """
    results: dict[str, Result] = {}
    for unit in ALL:
        if subject.name not in unit.ids or (tags is not None and not unit.tags & tags):
            continue
        rid = unit.id_for(subject.name)
        why = subject.skipped(unit.tags)
        if why is not None:
            results[rid] = Result(rid, unit.title, Status.SKIP, why)
            continue
        try:
            facts = subject.facts(unit.facts)
        except Exception as exc:  # noqa: BLE001 - a malformed facts record: an unknown, not a pass
            results[rid] = Result(
                rid,
                unit.title,
                Status.ERROR,
                f"the check could not run: {type(exc).__name__}: {exc}",
                cause="the facts were incomplete or malformed, or the check has a bug",
            )
            continue
        if facts is None:
            continue
        result = unit.run(facts, subject.name)
        if rid not in results or result.status is not Status.SKIP:
            results[rid] = result
    return list(results.values())
