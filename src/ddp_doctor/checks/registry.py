"""The one registry of checks, found in checks.units, and `evaluate(subject)` over it."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from types import ModuleType
from typing import Any

from ddp_doctor.checks import units as units_package
from ddp_doctor.checks.model import Check, Subject
from ddp_doctor.report import Result, Status


def discover(package: ModuleType = units_package) -> tuple[Check[Any], ...]:
    """Every `Check` a module of `package` exports at its top level, in `order`.

    Two units with one `order` or one name are refused at import: the report's order and the docs'
    anchors would depend on file names.
    """
    found: dict[int, Check[Any]] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if not isinstance(value, Check) or any(value is unit for unit in found.values()):
                continue
            if value.order in found:
                raise ValueError(f"checks {found[value.order].name!r} and {value.name!r} both have order {value.order}")
            found[value.order] = value
    ordered = tuple(found[order] for order in sorted(found))
    names = [unit.name for unit in ordered]
    if len(set(names)) != len(names):
        raise ValueError(f"two checks share a name: {sorted(n for n in names if names.count(n) > 1)}")
    return ordered


ALL: tuple[Check[Any], ...] = discover()


def evaluate(
    subject: Subject, tags: AbstractSet[str] | None = None, units: Iterable[Check[Any]] | None = None
) -> list[Result]:
    """Every unit (of ALL unless `units` is given) that runs on `subject` and has one of `tags`, when
    given, in order.

    A unit the subject has no facts for is left out; one whose facts are malformed or whose judge
    breaks is an `error` Result, never a pass. One Result per id: two units may answer one id on a
    subject (`image.torch` is whether torch is installed, then its build), and a later unit that
    skips leaves the earlier verdict in place.
    """
    results: dict[str, Result] = {}
    for unit in ALL if units is None else units:
        if subject.name not in unit.ids or (tags is not None and not unit.tags & tags):
            continue
        rid = unit.id_for(subject.name)
        why = subject.skipped(unit.tags)
        if why is not None:
            results[rid] = Result(rid, unit.title, Status.SKIP, why)
            continue
        try:
            facts = subject.facts(unit.facts)
        except Exception as exc:  # noqa: BLE001 - a malformed facts record: an unknown, not a pass
            results[rid] = Result(
                rid,
                unit.title,
                Status.ERROR,
                f"the check could not run: {type(exc).__name__}: {exc}",
                cause="the facts were incomplete or malformed, or the check has a bug",
            )
            continue
        if facts is None:
            continue
        result = unit.run(facts, subject.name)
        if rid not in results or result.status is not Status.SKIP:
            results[rid] = result
    return list(results.values())
