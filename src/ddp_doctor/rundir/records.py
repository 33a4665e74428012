"""The records a rank writes for its parent, shared by both sides of the process boundary.

Each is a frozen dataclass with `to_json` (the rank writes it) and `from_json` (the parent reads it);
nothing else knows their JSON keys. Every file carries `schema`: a parent meeting a file of another
version, a file cut short, or a file nobody here wrote gets a RecordError naming the file and what is
wrong with it, never a half-read record.

    Heartbeat   rank-N.hb    where the rank is: its phase, the step in it, the phase's deadline
    RankResult  rank-N.json  the rank's result: who it is, whether it finished, and its report (`body`),
                             whose shape belongs to the entry module that wrote it (the live chain's
                             phases, bench's ops)
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


def _object(text: str, what: str) -> dict[str, Any]:
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


def _take(data: Mapping[str, Any], name: str, kinds: tuple[type, ...], what: str, default: Any = ...) -> Any:
    """data[name], refused unless it is one of kinds (bool is not an int here unless named)."""
    if name not in data:
        if default is ...:
            raise RecordError(f"{what} lacks its {name!r} field")
        return default
    value = data[name]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise RecordError(f"{what} field {name!r} is {value!r}, not {' or '.join(k.__name__ for k in kinds)}")
    return value


_NUMBER = (int, float)
_NONE = type(None)


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
        return cls.from_dict(_object(text, what), what)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "a heartbeat") -> Heartbeat:
        return cls(
            phase=_take(data, "phase", (str,), what),
            time=float(_take(data, "time", _NUMBER, what)),
            pid=_take(data, "pid", (int,), what),
            progress=_take(data, "progress", (int,), what),
            step=_take(data, "step", (str, _NONE), what, None),
            since=_take(data, "since", (*_NUMBER, _NONE), what, None),
            deadline=_take(data, "deadline", (*_NUMBER, _NONE), what, None),
        )


_ENVELOPE = ("schema", "rank", "pid", "finished")


@dataclass(frozen=True)
class RankResult:
    """A rank's result file, rewritten (atomically) as the rank goes, so a later hang keeps what it had."""

    rank: int
    pid: int
    finished: bool
    """True once the rank reported everything it was asked for."""
    body: Mapping[str, Any] = field(default_factory=dict)
    """What the entry module reports; its keys are the entry module's (the live chain, bench)."""

    def to_json(self) -> str:
        # default=str: a body may hold a value JSON has no type for (a torch.Size, a Path); its text is enough.
        return json.dumps(
            {"schema": SCHEMA, "rank": self.rank, "pid": self.pid, "finished": self.finished, **self.body}, default=str
        )

    def payload(self) -> dict[str, Any]:
        """The body with the rank, pid and finished flag beside it: the parent's per-rank view."""
        return {**self.body, "rank": self.rank, "pid": self.pid, "finished": self.finished}

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> RankResult:
        """The record of a rank's payload: its rank, pid and finished flag lifted out of it, the rest the body."""
        what = "a rank's payload"
        return cls(
            rank=_take(payload, "rank", (int,), what),
            pid=_take(payload, "pid", (int,), what),
            finished=_take(payload, "finished", (bool,), what, False),
            body={k: v for k, v in payload.items() if k not in _ENVELOPE},
        )

    @classmethod
    def from_json(cls, text: str, what: str = "a rank's result") -> RankResult:
        data = _object(text, what)
        return cls(
            rank=_take(data, "rank", (int,), what),
            pid=_take(data, "pid", (int,), what),
            finished=_take(data, "finished", (bool,), what),
            body={k: v for k, v in data.items() if k not in _ENVELOPE},
        )
