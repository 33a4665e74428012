"""Module names inside checks/ say what they hold: none shares its file name with a module elsewhere
in the package (a traceback, grep or a reader could not tell `checks/units/torchrun.py` from the
torchrun argv builder), except the few listed here, whose names mean the same role in their own package."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "ddp_doctor"

SAME_ROLE = {
    "docs.py": "the generator of its package's docs page (checks/docs.py, diagnose/docs.py)",
    "model.py": "the records of its package's model (checks: Check, Finding, Subject; deploy/lint: Unit)",
    "table.py": "checks/table.py reads checks/knowledge.yaml; bench/table.py lays out nccl-tests tables; "
    "renaming the first touches every lint parser, left for the owner of deploy/lint",
}


def _modules() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for path in SRC.rglob("*.py"):
        if path.name != "__init__.py" and "__pycache__" not in path.parts:
            where[path.name].append(str(path.relative_to(SRC)))
    return where


def test_no_module_of_checks_shares_its_name() -> None:
    where = _modules()
    ours = {name for name, files in where.items() if any(f.startswith("checks/") for f in files)}
    assert len(ours) > 30  # the walk found the units and facts
    shared = {name: sorted(where[name]) for name in ours if len(where[name]) > 1 and name not in SAME_ROLE}
    assert not shared, shared


def test_every_unit_module_declares_a_check() -> None:
    from ddp_doctor.checks import registry

    declared = {unit.judge.__module__.rsplit(".", 1)[1] for unit in registry.ALL}
    files = {p.stem for p in (SRC / "checks" / "units").glob("*.py") if p.name != "__init__.py"}
    assert files == declared, "a module in checks/units/ is a check, nothing else"
