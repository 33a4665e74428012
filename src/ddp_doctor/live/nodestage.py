"""The nodes of a live check as one stage around the launch: one node (nothing to add) or a node of
several (live/multinode/node.py). The chain calls the same five steps either way, so it has no
multi-node branches:

    stage.blocked()               # preflight failed: its findings instead of a launch (None: go on)
    spec = stage.apply(spec)      # rendezvous fields and the ranks' env
    with stage.watch():           # node 0: who connects to the c10d store
        outcome = launch(spec)
    stage.adopt(outcome, plan)    # node 0: every node's rank payloads, before the merge
    stage.conclude(results, root_cause, outcome)   # what the stage adds to the judged results
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

from ddp_doctor.live.launch import RunOutcome, TorchrunSpec
from ddp_doctor.live.merge import Plan
from ddp_doctor.report import Result


@dataclass(frozen=True)
class Conclusion:
    """What a stage adds to the node's own results."""

    facts: Mapping[str, Any] = field(default_factory=dict)
    """Top-level facts of the report (`multinode`)."""
    results: tuple[Result, ...] = ()
    """After the node's own results."""
    lead: Result | None = None
    """First on the screen and the root cause: it explains every other failure (a lost link)."""


class Stage(Protocol):
    def blocked(self) -> Conclusion | None: ...

    def apply(self, spec: TorchrunSpec) -> TorchrunSpec: ...

    def watch(self) -> AbstractContextManager[None]: ...

    def adopt(self, outcome: RunOutcome, merge_plan: Plan) -> None: ...

    def conclude(self, results: Sequence[Result], root_cause: str | None, outcome: RunOutcome) -> Conclusion: ...


class OneNode:
    """A one-node check (--standalone): torchrun's own rendezvous, nothing to add."""

    def blocked(self) -> Conclusion | None:
        return None

    def apply(self, spec: TorchrunSpec) -> TorchrunSpec:
        return spec

    def watch(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def adopt(self, outcome: RunOutcome, merge_plan: Plan) -> None:
        return None

    def conclude(self, results: Sequence[Result], root_cause: str | None, outcome: RunOutcome) -> Conclusion:
        return Conclusion()
