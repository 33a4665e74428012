"""Result ids are declared in one place (ddp_doctor/resultids.py) with their titles: an id written in the
code that is not declared fails here, as does a declared one nothing produces or a title that differs."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ddp_doctor import resultids
from ddp_doctor.checks import registry
from ddp_doctor.live.merge import PHASE_TITLES

SRC = Path(resultids.__file__).parent
ID = re.compile(r"^(env|image|live|multinode|run|bench|health)\.[a-z0-9_]+(\.[a-z0-9_]+)*$")


def _literals() -> dict[str, set[str]]:
    """id -> files of the package that write it as a string."""
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        if path.name == "resultids.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ID.match(node.value):
                found.setdefault(node.value, set()).add(str(path.relative_to(SRC)))
    return found


def _titled() -> list[tuple[str, str, str]]:
    """(id, title, file) wherever a call writes a literal id with a literal title beside it."""
    pairs = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Result"):
                continue
            words = {k.arg: k.value for k in node.keywords}
            rid, title = (node.args + [None, None])[:2] if node.args else (words.get("id"), words.get("title"))
            if isinstance(rid, ast.Constant) and isinstance(title, ast.Constant) and ID.match(str(rid.value)):
                pairs.append((str(rid.value), str(title.value), str(path.relative_to(SRC))))
    return pairs


def _unit_titles() -> dict[str, set[str]]:
    titles: dict[str, set[str]] = {}
    for unit in registry.ALL:
        for subject in unit.ids:
            titles.setdefault(unit.id_for(subject), set()).add(unit.title)
    return titles


def test_every_id_written_in_the_code_is_declared() -> None:
    literals = _literals()
    assert len(literals) > 50  # the walk found the package's ids
    undeclared = {rid: files for rid, files in literals.items() if not resultids.declared(rid)}
    assert not undeclared, f"declare these in ddp_doctor/resultids.py: {undeclared}"


def test_every_declared_id_is_produced_somewhere() -> None:
    made = set(_literals()) | set(_unit_titles()) | {f"live.{phase}" for phase in PHASE_TITLES}
    assert not set(resultids.DECLARED) - made


def test_titles_in_the_code_are_the_declared_ones() -> None:
    pairs = _titled()
    assert len(pairs) > 10
    # jobwatch gives these ids a second title in one situation each; its owner is to settle on one.
    second_titles = {("run.failure", "First failing rank"), ("run.gather", "Evidence sent to node 0")}
    pairs = [p for p in pairs if p[:2] not in second_titles]
    differ = [
        (rid, title, f) for rid, title, f in pairs if rid in resultids.DECLARED and resultids.DECLARED[rid] != title
    ]
    assert not differ, differ
    for rid, titles in _unit_titles().items():
        if rid.startswith("lint."):
            continue  # a unit's lint id is a template; lint's ids and titles are declared by deploy/lint/rules.yaml
        if len(titles) == 1:  # image.torch is answered by two units, one title each
            assert resultids.DECLARED[rid] == next(iter(titles)), rid
    for phase, title in PHASE_TITLES.items():
        assert resultids.DECLARED.get(f"live.{phase}", title) == title
