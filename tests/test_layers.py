"""The import contract in pyproject.toml ([tool.importlinter]) holds, and it would catch an upward edge
or a cycle: the same check on a copy of the package with one bad import added must fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.fail("lint-imports is not installed: pip install -e '.[dev]'")
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=src, timeout=120, check=False)


def test_the_tree_keeps_its_layers() -> None:
    proc = _lint_imports(ROOT / "src")
    assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.mark.parametrize(
    ("module", "bad_import"),
    [
        ("report.py", "import ddp_doctor.cli"),  # an upward edge: the report model must not know the cli
        ("knowledge/arch.py", "import ddp_doctor.checks"),  # knowledge is below checks
        ("live/merge.py", "import ddp_doctor.bench.sweep"),  # bench uses live: live using bench is a cycle
        # env.target imports env.probes (interp_child, interpreters): a probe importing the target is
        # the cycle that used to be ignored in pyproject.toml, now caught
        ("env/probes/system.py", "import ddp_doctor.env.target"),
        # argparse stops at commands/: the live chain reads check's frozen CheckConfig
        ("live/chain.py", "import argparse"),
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path: Path, module: str, bad_import: str) -> None:
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "ddp_doctor", src / "ddp_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    target = src / "ddp_doctor" / module
    target.write_text(target.read_text() + f"\n{bad_import}  # noqa\n")
    proc = _lint_imports(src)
    assert proc.returncode != 0 and "BROKEN" in proc.stdout, proc.stdout[-2000:]
