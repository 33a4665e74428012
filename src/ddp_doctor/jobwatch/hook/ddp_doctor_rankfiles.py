"""Who a rank is (rank-N.pid) and how its Python ended (rank-N.exit): the records, for both sides.

The startup hook writes them inside the job and imports this file by its own name (the hook's directory
is first on the job's PYTHONPATH, and the job's interpreter may not have ddp_doctor installed); the
doctor reads them with `ddp_doctor.jobwatch.hook.ddp_doctor_rankfiles`. So: the standard library only,
and a name no user module will have. Nothing else knows their JSON keys.

`from_json` refuses a file that is not such a record (cut short by a killed writer, written by something
else, another shape) with NotARecord, a ValueError whose text says what is wrong, so the report can name it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

EXIT_KINDS = ("exit", "exception")
"""exit: Python ran its atexit handlers; exception: an uncaught exception reached the excepthook."""


class NotARecord(ValueError):
    """A rank-N.pid or rank-N.exit that is not a record this module wrote: torn, foreign or another shape."""


def _fields(text: str | bytes, what: str) -> dict[str, object]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise NotARecord(f"{what} is not JSON (cut short, or not written by the startup hook): {exc}") from None
    if not isinstance(data, dict):
        raise NotARecord(f"{what} is JSON but not an object: {type(data).__name__}")
    return data


def _int(data: dict[str, object], name: str, what: str) -> int:
    value = data.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise NotARecord(f"{what} field {name!r} is {value!r}, not an integer")
    return value


def _float(data: dict[str, object], name: str, what: str) -> float:
    value = data.get(name)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise NotARecord(f"{what} field {name!r} is {value!r}, not a number")
    return float(value)


def _optional(data: dict[str, object], name: str, kind: type, what: str) -> object:
    value = data.get(name)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise NotARecord(f"{what} field {name!r} is {value!r}, not {kind.__name__} or null")
    return value


@dataclass(frozen=True)
class RankPid:
    """rank-N.pid: written once when the rank's Python starts."""

    rank: int
    pid: int
    argv: tuple[str, ...]
    """The first arguments of the rank's command line."""
    time: float
    """Epoch seconds when the rank started."""
    world_size: int | None
    """WORLD_SIZE as the rank saw it; None where it was unset or not a number."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "rank": self.rank,
                "pid": self.pid,
                "argv": list(self.argv),
                "time": self.time,
                "world_size": self.world_size,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes, what: str = "a rank's pid file") -> RankPid:
        data = _fields(text, what)
        argv = data.get("argv")
        if not isinstance(argv, list):
            raise NotARecord(f"{what} field 'argv' is {argv!r}, not a list")
        world = _optional(data, "world_size", int, what)
        return cls(
            rank=_int(data, "rank", what),
            pid=_int(data, "pid", what),
            argv=tuple(str(a) for a in argv),
            time=_float(data, "time", what),
            world_size=world if isinstance(world, int) else None,
        )


@dataclass(frozen=True)
class RankExit:
    """rank-N.exit: written when the rank's Python ends by its own exit path (not by a signal or os._exit)."""

    kind: str
    """One of EXIT_KINDS."""
    detail: str | None
    """The exception's line ('ValueError: bad'); None for a plain exit."""
    time: float
    """Epoch seconds when it ended."""

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "detail": self.detail, "time": self.time})

    @classmethod
    def from_json(cls, text: str | bytes, what: str = "a rank's exit file") -> RankExit:
        data = _fields(text, what)
        kind = data.get("kind")
        if kind not in EXIT_KINDS:
            raise NotARecord(f"{what} field 'kind' is {kind!r}, not one of {', '.join(EXIT_KINDS)}")
        detail = _optional(data, "detail", str, what)
        return cls(str(kind), detail if isinstance(detail, str) else None, _float(data, "time", what))


def write(run_dir: str, name: str, suffix: str, record: RankPid | RankExit) -> None:
    """run_dir/NAME.SUFFIX, atomically: a reader sees no file or the whole record."""
    target = os.path.join(run_dir, f"{name}.{suffix}")
    with open(target + ".tmp", "w") as f:
        f.write(record.to_json())
    os.replace(target + ".tmp", target)
