"""docs/ARCHITECTURE.md's table of what each package imports is the code's: every import of the package's
own modules (also inside functions and under TYPE_CHECKING) is read here and compared, row by row."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "ddp_doctor"
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
_ROW = re.compile(r"^\| `([a-z_]+)` \| ([^|]*) \|$")


def imports_by_package() -> dict[str, set[str]]:
    tops = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in SRC.rglob("*.py")} - {"__init__", "__main__"}
    found: dict[str, set[str]] = {top: set() for top in tops}
    for path in SRC.rglob("*.py"):
        me = path.relative_to(SRC).parts[0].removesuffix(".py")
        if me not in found:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{a.name}" if node.module == "ddp_doctor" else node.module for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "ddp_doctor" and len(parts) > 1 and parts[1] in tops and parts[1] != me:
                    found[me].add(parts[1])
    return found


def documented() -> dict[str, set[str]]:
    section = PAGE.read_text(encoding="utf-8").split("## What each package imports", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        match = _ROW.match(line.strip())
        if match:
            listed = match.group(2).strip()
            rows[match.group(1)] = set() if listed == "nothing" else {w.strip() for w in listed.split(",")}
    return rows


def test_the_page_lists_what_each_package_imports() -> None:
    code = imports_by_package()
    assert len(code) > 15
    assert documented() == code


def test_a_new_import_would_show() -> None:
    code = imports_by_package()
    assert "live" in code["jobwatch"] and "jobwatch" not in code["live"]  # the reader sees the direction
