"""One name per concept: no two classes in the package share a name (two `LaunchSpec`s and two `Plan`s
once meant different things; a reader, grep and a traceback could not tell them apart)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "ddp_doctor"


def test_every_class_name_is_used_once() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(SRC)))
    assert len(where) > 50  # the walk found the package's classes
    twice = {name: files for name, files in where.items() if len(files) > 1}
    assert not twice, twice
