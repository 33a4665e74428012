"""Exit codes an orchestrator can act on (exitcodes.yaml): job failed / hang / infrastructure fault.

Read by `run --exit-code verdict` (the code of a verdict) and by `launch` (the failure policies it writes
around a job that runs under `ddp-doctor run`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml


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


@functools.cache
def _read() -> tuple[dict[str, int], tuple[Action, ...], frozenset[str]]:
    """(kind -> its exit code, the actions, the infrastructure signatures) of exitcodes.yaml."""
    data = yaml.safe_load((Path(__file__).with_name("exitcodes.yaml")).read_text(encoding="utf-8"))
    codes = {str(kind): int(e["code"]) for kind, e in data["codes"].items()}
    actions = tuple(
        Action(str(kind), int(e["code"]), str(e["job"]), str(e["jobset"]))
        for kind, e in data["codes"].items()
        if "job" in e
    )
    return codes, actions, frozenset(str(e["id"]) for e in data["infrastructure"])


def code(kind: str) -> int:
    return _read()[0][kind]


def infrastructure_ids() -> frozenset[str]:
    """Diagnosis signatures that mean an infrastructure fault rather than a bug in the job."""
    return _read()[2]


def actions() -> tuple[Action, ...]:
    """The codes an orchestrator acts on, in the table's order (the ones with a Kubernetes action)."""
    return _read()[1]
