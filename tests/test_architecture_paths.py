"""docs/ARCHITECTURE.md names files that exist, and names every module of the check model."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "ddp_doctor"
PAGE = ROOT / "docs" / "ARCHITECTURE.md"
_PATH = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)+[a-z_]+\.(?:py|yaml|sh))")


def _exists(path: str) -> bool:
    if (SRC / path).exists() or (ROOT / path).exists():
        return True
    # the layout block names a nested file under its package's line (hook/sitecustomize.py under jobwatch/)
    return any(str(p).endswith("/" + path) for p in SRC.rglob(Path(path).name))


def test_every_path_the_page_names_exists() -> None:
    named = set(_PATH.findall(PAGE.read_text(encoding="utf-8")))
    assert len(named) > 20
    missing = sorted(p for p in named if not _exists(p))
    assert not missing, f"docs/ARCHITECTURE.md names files that do not exist: {missing}"


def test_the_page_names_every_module_of_the_check_model() -> None:
    text = PAGE.read_text(encoding="utf-8")
    modules = [p for p in (SRC / "checks").rglob("*.py") if p.name != "__init__.py" and "units" not in p.parts]
    assert len(modules) > 8
    unnamed = sorted(str(p.relative_to(SRC)) for p in modules if p.name not in text)
    assert not unnamed, f"say what these hold in docs/ARCHITECTURE.md: {unnamed}"
