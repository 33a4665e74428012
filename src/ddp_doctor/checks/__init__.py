"""The checks: declared units over typed facts, shared by `check`, `image` and `lint`.

Adding a check: one module here with its judge and its Check declaration, one line in ALL, its
facts in checks.facts, its test. docs/checks.md is generated from ALL (checks/docs.py).
"""

from __future__ import annotations

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
from ddp_doctor.checks.model import Check, Finding

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

__all__ = ["ALL", "Check", "Finding"]
