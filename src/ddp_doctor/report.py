"""The Report: the one data model every command produces and every renderer reads.

The JSON form (`to_dict`) is a public contract, `schema_version` 1, documented in
docs/report-schema.md. Renderers are pure functions of a Report.
"""

from __future__ import annotations

import enum
import socket
import time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, TypedDict, cast

from ddp_doctor import __version__

SCHEMA_VERSION = 1


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    INFO = "info"
    """Noted, not judged: a deliberate trade-off or a fact worth knowing; never changes the verdict."""
    ERROR = "error"  # the doctor's own probe broke: an unknown, never a pass


class Verdict(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Evidence:
    """One line of proof: where it came from, which line, what it said."""

    source: str
    """A file name, `rank-1.log`, `stderr`, `nvml`, ..."""
    text: str
    line: int | None = None
    """1-based line number in `source`, when it is a file."""

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "text": self.text}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evidence:
        return cls(source=str(d.get("source", "")), text=str(d.get("text", "")), line=d.get("line"))


@dataclass
class Result:
    """One check's outcome. `id` is stable and dotted; users grep for it."""

    id: str
    title: str
    status: Status
    summary: str
    """One line: what was observed against what was expected."""
    cause: str | None = None
    """Why, for warn / fail / error."""
    remedy: str | None = None
    """What to do: concrete flags, commands, YAML."""
    observed: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    """Numbers with the unit in the name: `busbw_gbps`, `step_ms`."""
    rank: int | None = None
    node: str | None = None
    phase: str | None = None
    evidence: list[Evidence] = field(default_factory=list)
    duration_s: float | None = None
    started: float | None = None
    """Wall-clock time (epoch seconds) at which the failure happened; orders root causes."""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "status":
                value = value.value
            elif f.name == "evidence":
                value = [e.to_dict() for e in value]
            d[f.name] = value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Result:
        """A result read back from JSON; a field of the wrong type is a ValueError naming it."""
        _mapping(d, "a result")
        kwargs: dict[str, Any] = {k: _kind(d, k, str, required=True) for k in ("id", "title", "summary")}
        for key in ("cause", "remedy", "node", "phase"):
            kwargs[key] = _kind(d, key, str)
        kwargs["rank"] = _kind(d, "rank", int)
        for key in ("duration_s", "started"):
            kwargs[key] = _kind(d, key, (int, float))
        try:
            kwargs["status"] = Status(d.get("status"))
        except ValueError:
            raise ValueError(f"result {kwargs['id']!r} has status {d.get('status')!r}") from None
        evidence = _kind(d, "evidence", list) or []
        kwargs["evidence"] = [Evidence.from_dict(_mapping(e, "an evidence entry")) for e in evidence]
        for key in ("observed", "expected"):
            kwargs[key] = dict(_kind(d, key, dict) or {})
        metrics = dict(_kind(d, "metrics", dict) or {})
        kwargs["metrics"] = {
            k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
        }
        return cls(**kwargs)


class MalformedReport(ValueError):
    """A report's JSON has a field of the wrong type, or none where one is required."""


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedReport(f"{what} is a JSON {_json_kind(value)}, expected an object")
    return value


def _kind(d: dict[str, Any], key: str, kind: type | tuple[type, ...], required: bool = False) -> Any:
    """d[key] when it is of `kind` (None when absent and not required); else a ValueError naming the field."""
    value = d.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or isinstance(value, bool):
        expected = kind.__name__ if isinstance(kind, type) else "number"
        raise MalformedReport(
            f"the field {key!r} is {'missing' if value is None else 'a JSON ' + _json_kind(value)}, expected {_JSON_NAMES.get(expected, expected)}"
        )
    return value


_JSON_NAMES = {
    "str": "a string",
    "int": "a whole number",
    "float": "a number",
    "list": "an array",
    "dict": "an object",
    "number": "a number",
}


def _json_kind(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


class TargetJson(TypedDict, total=False):
    """What was examined: a host, an image or one or more files."""

    host: str
    image: str
    engine: str
    """The container engine `check --image` ran the image with."""
    file: str
    files: str
    """Several files, named in a short list."""
    command: str
    """The job `run` watched."""
    python: str
    """The interpreter `check` and `bench` examined, and why that one."""


_SEVERITY = {Status.PASS: 0, Status.SKIP: 0, Status.INFO: 0, Status.WARN: 1, Status.ERROR: 2, Status.FAIL: 2}


@dataclass
class Report:
    command: str
    target: TargetJson
    results: list[Result] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    started: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    duration_s: float = 0.0
    root_cause: str | None = None
    """The id of the result that explains the others, or None when there is none."""
    headline: str | None = None
    """One or two sentences: what was verified and what was not (render/headline.py writes it)."""
    tool: dict[str, str] = field(default_factory=lambda: {"name": "ddp-doctor", "version": __version__})
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def for_host(cls, command: str) -> Report:
        return cls(command=command, target=TargetJson(host=socket.gethostname()))

    def add(self, *results: Result) -> None:
        self.results.extend(results)

    def extend(self, results: list[Result]) -> None:
        self.results.extend(results)

    def verdict(self) -> Verdict:
        worst = max((_SEVERITY[r.status] for r in self.results), default=0)
        return (Verdict.PASS, Verdict.WARN, Verdict.FAIL)[worst]

    def failures(self) -> list[Result]:
        return [r for r in self.results if r.status in (Status.FAIL, Status.ERROR)]

    def pick_root_cause(self) -> str | None:
        """The earliest failure in time; results without a time keep their order."""
        failed = self.failures()
        if not failed:
            return None
        timed = [r for r in failed if r.started is not None]
        first = min(timed, key=lambda r: r.started or 0.0) if timed else failed[0]
        return first.id

    def finish(self, started_monotonic: float) -> Report:
        self.duration_s = round(time.monotonic() - started_monotonic, 3)
        if self.root_cause is None:
            self.root_cause = self.pick_root_cause()
        return self

    def exit_code(self, strict: bool = False) -> int:
        verdict = self.verdict()
        if verdict is Verdict.FAIL or (strict and verdict is Verdict.WARN):
            return 1
        return 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "tool": dict(self.tool),
            "command": self.command,
            "target": dict(self.target),
            "started": self.started,
            "duration_s": self.duration_s,
            "verdict": self.verdict().value,
            "root_cause": self.root_cause,
            "headline": self.headline,
            "facts": self.facts,
            "results": [r.to_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Report:
        _mapping(d, "the report")
        version = d.get("schema_version")
        if version != SCHEMA_VERSION:
            raise ValueError(f"report schema_version is {version!r}, this ddp-doctor reads {SCHEMA_VERSION}")
        return cls(
            command=_kind(d, "command", str, required=True),
            # A report of another version may name other keys: they are kept and shown as they are.
            target=cast(TargetJson, dict(_kind(d, "target", dict) or {})),
            results=[Result.from_dict(r) for r in _kind(d, "results", list) or []],
            facts=dict(_kind(d, "facts", dict) or {}),
            started=str(d.get("started", "")),
            duration_s=float(_kind(d, "duration_s", (int, float)) or 0.0),
            root_cause=_kind(d, "root_cause", str),
            headline=d.get("headline") if isinstance(d.get("headline"), str) else None,
            tool=dict(_kind(d, "tool", dict) or {}),
            schema_version=int(version),
        )
