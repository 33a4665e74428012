"""Exit codes an orchestrator can act on (exitcodes.yaml): job failed / hang / infrastructure fault.

Read by `run --exit-code verdict` (the code of a verdict) and by `launch` (the failure policies it writes
around a job that runs under `ddp-doctor run`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    data = yaml.safe_load((Path(__file__).with_name("exitcodes.yaml")).read_text(encoding="utf-8"))
    return dict(data)


def code(kind: str) -> int:
    return int(table()["codes"][kind]["code"])


def infrastructure_ids() -> frozenset[str]:
    return frozenset(str(e["id"]) for e in table()["infrastructure"])


@dataclass(frozen=True)
class Action:
    """What an orchestrator does with one exit code of the verdict."""

    kind: str
    """job_failed, hang, infrastructure."""
    code: int
    job: str
    """A batch/v1 Job podFailurePolicy action: FailJob, Count or Ignore."""
    jobset: str
    """A JobSet failurePolicy action: FailJobSet or RestartJobSet."""


def actions() -> tuple[Action, ...]:
    """The codes an orchestrator acts on, in the table's order (the ones with a Kubernetes action)."""
    return tuple(
        Action(kind, int(entry["code"]), str(entry["job"]), str(entry["jobset"]))
        for kind, entry in table()["codes"].items()
        if "job" in entry
    )
