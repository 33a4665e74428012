"""The phases of the live chain, one module each; each has `run(ctx) -> list[check dict]`.

A check dict: {"id", "status" (pass|warn|fail|skip), "summary", "observed", "expected",
"metrics", optional "cause", "remedy"}. A phase raises when it cannot go on; the worker
records the exception as the phase's failure.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


def load(name: str) -> ModuleType:
    return importlib.import_module(f"ddp_doctor.live.phases.{name}")


def check(id: str, status: str, summary: str, **extra: Any) -> dict[str, Any]:
    return {"id": id, "status": status, "summary": summary, "observed": {}, "expected": {}, "metrics": {}, **extra}


class PeerError(RuntimeError):
    """This rank failed because of other ranks (they never joined, died or hung): not a root cause."""

    def __init__(self, message: str, blame_ranks: list[int]):
        super().__init__(message)
        self.blame_ranks = blame_ranks
