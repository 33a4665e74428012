"""Readers of the report's `facts` JSON: each returns a field as its declared type or raises a TypeError
that names it, so a malformed facts file ends as an `error` Result, never coerced into a pass."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def section(facts: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = facts.get(key)
    return value if isinstance(value, Mapping) else {}


def nonempty(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def typed(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """`value` when it is None or of `kind`; else a TypeError naming the field.

    A facts file written by another version or edited by hand can hold anything; a check reading a
    wrong-typed field must end as an `error` Result (Check.run / env.checks.evaluate), never be
    coerced into a value that passes.
    """
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if value is None or (isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)):
        return value
    names = " or ".join(k.__name__ for k in kinds)
    raise TypeError(f"facts field {what} is {type(value).__name__} {value!r:.60}; expected {names}")


def required(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """Like `typed`, and None (absent) is malformed too: a record without its key field."""
    if value is None:
        raise TypeError(f"facts field {what} is missing")
    return typed(value, kind, what)


def str_at(section: Mapping[str, Any], key: str, where: str) -> str | None:
    """A string field of a host facts section ('' reads as absent); a wrong type raises."""
    return nonempty(typed(section.get(key), str, f"{where}.{key}"))


def int_at(section: Mapping[str, Any], key: str, where: str) -> int | None:
    value: int | None = typed(section.get(key), int, f"{where}.{key}")
    return value


def bool_at(section: Mapping[str, Any], key: str, where: str) -> bool | None:
    value: bool | None = typed(section.get(key), bool, f"{where}.{key}")
    return value


def float_of(value: Any, what: str) -> float | None:
    n = typed(value, (int, float), what)
    return None if n is None else float(n)


def typed_at(section: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """`typed` for the field `key` of the section named `where`."""
    return typed(section.get(key), kind, f"{where}.{key}")


def required_at(section: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    """`required` for the field `key` of the section named `where`."""
    return required(section.get(key), kind, f"{where}.{key}")


def version_tuple(text: Any) -> tuple[int, ...] | None:
    """(2, 21, 5) from '2.21.5' or '2.21.5+cuda12.4'; None when the text does not start with a version."""
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return tuple(int(g) for g in m.groups() if g is not None) if m else None
