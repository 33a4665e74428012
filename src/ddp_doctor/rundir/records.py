"""The records a rank writes for its parent, shared by both sides of the process boundary.

Each is a frozen dataclass with `to_json` (the rank writes it) and `from_json` (the parent reads it);
nothing else knows their JSON keys. Every file carries `schema`: a parent meeting a file of another
version, a file cut short, or a file nobody here wrote gets a RecordError naming the file and what is
wrong with it, never a half-read record.

    Heartbeat   rank-N.hb    where the rank is: its phase, the step in it, the phase's deadline
    RankResult  rank-N.json  the rank's result: who it is, whether it finished, the live chain's
                             phases (PhaseRecord with its CheckRecords, PhaseErrorRecord), and the rest
                             of its report (`body`),
                             whose shape belongs to the entry module that wrote it (torch facts, bench's ops)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = 1
"""The version of every record below; raised when a field changes meaning or goes away."""


class RecordError(ValueError):
    """A run-directory file that is not a record of this schema: torn, foreign or of another version."""


def json_object(text: str, what: str) -> dict[str, Any]:
    """The JSON object in text, of this schema; RecordError naming `what` otherwise."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordError(f"{what} is not JSON (cut short, or not written by a rank): {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{what} is JSON but not an object: {type(data).__name__}")
    version = data.get("schema")
    if version != SCHEMA:
        said = "no schema field" if version is None else f"schema {version!r}"
        raise RecordError(f"{what} has {said}; this ddp-doctor reads schema {SCHEMA}")
    return data


def take(data: Mapping[str, Any], name: str, kinds: tuple[type, ...], what: str, default: Any = ...) -> Any:
    """data[name], refused unless it is one of kinds (bool is not an int here unless named)."""
    if name not in data:
        if default is ...:
            raise RecordError(f"{what} lacks its {name!r} field")
        return default
    value = data[name]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise RecordError(f"{what} field {name!r} is {value!r}, not {' or '.join(k.__name__ for k in kinds)}")
    return value


NUMBER = (int, float)
NONE = type(None)


@dataclass(frozen=True)
class Heartbeat:
    """Where a rank is. `progress` only grows, so the rank with the lowest one is the laggard."""

    phase: str
    time: float
    """Epoch seconds of this beat."""
    pid: int
    progress: int
    step: str | None = None
    since: float | None = None
    """Epoch seconds when this phase began."""
    deadline: float | None = None
    """Epoch seconds by which this phase must end; None when it has none."""

    def to_json(self) -> str:
        return json.dumps({"schema": SCHEMA, **asdict(self)})

    def to_dict(self) -> dict[str, Any]:
        """The record as the report's JSON shows it (observed, facts)."""
        return asdict(self)

    @classmethod
    def from_json(cls, text: str, what: str = "a heartbeat") -> Heartbeat:
        return cls.from_dict(json_object(text, what), what)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a heartbeat") -> Heartbeat:
        return cls(
            phase=take(data, "phase", (str,), what),
            time=float(take(data, "time", NUMBER, what)),
            pid=take(data, "pid", (int,), what),
            progress=take(data, "progress", (int,), what),
            step=take(data, "step", (str, NONE), what, None),
            since=take(data, "since", (*NUMBER, NONE), what, None),
            deadline=take(data, "deadline", (*NUMBER, NONE), what, None),
        )


_ENVELOPE = ("schema", "rank", "pid", "finished", "node", "teardown_stuck", "phases")


@dataclass(frozen=True)
class PhaseErrorRecord:
    """Why a phase of the live chain failed, as the rank saw it."""

    type: str
    """The exception's type name; PhaseTimeout when the rank's watchdog ended the phase."""
    message: str
    traceback: str | None = None
    blame_ranks: tuple[int, ...] | None = None
    """The ranks this rank waited for (a phase that understands its failure names them)."""
    step: str | None = None
    """The phase's last step before it failed."""
    cause: str | None = None
    remedy: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str) -> PhaseErrorRecord:
        blame = take(data, "blame_ranks", (list, tuple, NONE), what, None)
        if blame is not None and not all(isinstance(b, int) and not isinstance(b, bool) for b in blame):
            raise RecordError(f"{what} field 'blame_ranks' is {blame!r}, not a list of ranks")
        return cls(
            type=take(data, "type", (str,), what),
            message=take(data, "message", (str,), what, ""),
            traceback=take(data, "traceback", (str, NONE), what, None),
            blame_ranks=tuple(blame) if blame is not None else None,
            step=take(data, "step", (str, NONE), what, None),
            cause=take(data, "cause", (str, NONE), what, None),
            remedy=take(data, "remedy", (str, NONE), what, None),
        )


CHECK_STATUSES = ("pass", "warn", "fail", "skip")
"""What a phase's check can say (report.Status's judged values; the rank never says info or error)."""


@dataclass(frozen=True)
class CheckRecord:
    """One check a phase ran on one rank: what the parent turns into a Result (merge agrees the ranks)."""

    id: str
    """The Result id, declared in resultids."""
    status: str
    """One of CHECK_STATUSES."""
    summary: str
    observed: Mapping[str, Any] = field(default_factory=dict)
    expected: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    cause: str | None = None
    remedy: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if v is not None}
        return out | {"observed": dict(self.observed), "expected": dict(self.expected), "metrics": dict(self.metrics)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str) -> CheckRecord:
        what = f"{what} check {data.get('id')!r}"
        status = take(data, "status", (str,), what)
        if status not in CHECK_STATUSES:
            raise RecordError(f"{what} field 'status' is {status!r}, not one of {', '.join(CHECK_STATUSES)}")
        return cls(
            id=take(data, "id", (str,), what),
            status=status,
            summary=take(data, "summary", (str,), what),
            observed=take(data, "observed", (dict,), what, {}),
            expected=take(data, "expected", (dict,), what, {}),
            metrics=take(data, "metrics", (dict,), what, {}),
            cause=take(data, "cause", (str, NONE), what, None),
            remedy=take(data, "remedy", (str, NONE), what, None),
        )


@dataclass(frozen=True)
class PhaseRecord:
    """One phase of the live chain on one rank: running, then pass or fail."""

    name: str
    status: str
    """running (the rank is in it, or died in it), pass or fail."""
    started: float | None = None
    """Epoch seconds."""
    budget_s: float | None = None
    kind: str | None = None
    """How a failed phase failed: error (it raised), stuck (its deadline passed), check (a check failed)."""
    failed_at: float | None = None
    duration_s: float | None = None
    cpu_s: float | None = None
    checks: tuple[CheckRecord, ...] = ()
    error: PhaseErrorRecord | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str) -> PhaseRecord:
        what = f"{what} phase {data.get('name')!r}"
        checks = take(data, "checks", (list, tuple, NONE), what, None) or ()
        if not all(isinstance(c, Mapping) for c in checks):
            raise RecordError(f"{what} holds a check that is not an object")
        error = take(data, "error", (dict, NONE), what, None)
        return cls(
            name=take(data, "name", (str,), what),
            status=take(data, "status", (str,), what),
            started=take(data, "started", (*NUMBER, NONE), what, None),
            budget_s=take(data, "budget_s", (*NUMBER, NONE), what, None),
            kind=take(data, "kind", (str, NONE), what, None),
            failed_at=take(data, "failed_at", (*NUMBER, NONE), what, None),
            duration_s=take(data, "duration_s", (*NUMBER, NONE), what, None),
            cpu_s=take(data, "cpu_s", (*NUMBER, NONE), what, None),
            checks=tuple(CheckRecord.from_dict(c, what) for c in checks),
            error=PhaseErrorRecord.from_dict(error, f"the error of {what}") if error is not None else None,
        )


@dataclass(frozen=True)
class RankResult:
    """A rank's result file, rewritten (atomically) as the rank goes, so a later hang keeps what it had."""

    rank: int
    pid: int
    finished: bool
    """True once the rank reported everything it was asked for."""
    node: str | None = None
    """The node the rank ran on, as its parent named it (live chain)."""
    teardown_stuck: bool = False
    """Every phase reported, but destroy_process_group() did not return (live chain)."""
    phases: tuple[PhaseRecord, ...] = ()
    """The live chain's phases in the order the rank ran them; none for other entry modules."""
    body: Mapping[str, Any] = field(default_factory=dict)
    """What else the entry module reports (the live chain's torch facts and phase outputs, bench's ops);
    its keys are the entry module's."""

    def phase(self, name: str) -> PhaseRecord | None:
        return next((p for p in self.phases if p.name == name), None)

    def to_json(self) -> str:
        # default=str: a body may hold a value JSON has no type for (a torch.Size, a Path); its text is enough.
        return json.dumps({"schema": SCHEMA, **self.payload()}, default=str)

    def payload(self) -> dict[str, Any]:
        """The record as one JSON object (what the file holds, less its schema)."""
        out: dict[str, Any] = {**self.body, "rank": self.rank, "pid": self.pid, "finished": self.finished}
        if self.node is not None:
            out["node"] = self.node
        if self.teardown_stuck:
            out["teardown_stuck"] = True
        if self.phases:
            out["phases"] = [_phase_dict(p) for p in self.phases]
        return out

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> RankResult:
        """The record of a rank's payload (what a rank builds as it goes); RecordError when it is malformed."""
        return cls.from_dict(payload, "a rank's payload")

    @classmethod
    def from_json(cls, text: str, what: str = "a rank's result") -> RankResult:
        return cls.from_dict(json_object(text, what), what)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a rank's result") -> RankResult:
        phases = take(data, "phases", (list, tuple), what, [])
        if not all(isinstance(p, Mapping) for p in phases):
            raise RecordError(f"{what} holds a phase that is not an object")
        return cls(
            rank=take(data, "rank", (int,), what),
            pid=take(data, "pid", (int,), what),
            finished=take(data, "finished", (bool,), what, False),
            node=take(data, "node", (str, NONE), what, None),
            teardown_stuck=take(data, "teardown_stuck", (bool,), what, False),
            phases=tuple(PhaseRecord.from_dict(p, what) for p in phases),
            body={k: v for k, v in data.items() if k not in _ENVELOPE},
        )


def _phase_dict(p: PhaseRecord) -> dict[str, Any]:
    out = {k: v for k, v in asdict(p).items() if v is not None and k not in ("checks", "error")}
    out["checks"] = [c.to_dict() for c in p.checks]
    if p.error is not None:
        err = asdict(p.error)
        err["blame_ranks"] = list(p.error.blame_ranks) if p.error.blame_ranks is not None else None
        out["error"] = err
    return out
