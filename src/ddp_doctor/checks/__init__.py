"""The checks: declared units over typed facts, shared by `check`, `image` and `lint`.

Adding a check: one module here with its judge and its Check declaration, one line in ALL, its
facts in checks.facts, its test. docs/checks.md is generated from ALL (checks/docs.py).
"""

from __future__ import annotations

from typing import Any

from ddp_doctor.checks import nccl, official_build, shm, torch_build, torchrun, user
from ddp_doctor.checks.model import Check, Finding

ALL: tuple[Check[Any], ...] = (
    torch_build.INSTALLED,
    torch_build.BUILD,
    official_build.CHECK,
    nccl.CHECK,
    torchrun.CHECK,
    shm.CHECK,
    user.CHECK,
)

__all__ = ["ALL", "Check", "Finding"]
