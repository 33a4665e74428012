"""CONTRIBUTING.md's worked example of a check is real: its code blocks are executed here, the
declared unit is run on typed facts, and the example's own test passes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.checks.model import Check
from ddp_doctor.report import Status

PAGE = Path(__file__).resolve().parent.parent / "CONTRIBUTING.md"
SRC = Path(__file__).resolve().parent.parent / "src" / "ddp_doctor"


def _section_blocks(title: str) -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_example_check_runs_and_its_test_passes() -> None:
    blocks = _section_blocks("Add a check")
    assert len(blocks) == 2, "the check and its test"
    module = types.ModuleType("contributing_example")  # dataclasses look their module up in sys.modules
    sys.modules[module.__name__] = module
    namespace: dict[str, Any] = module.__dict__
    exec(compile(blocks[0], f"{PAGE}:check", "exec"), namespace)  # noqa: S102 - the page's own example
    check = namespace["NOFILE"]
    assert isinstance(check, Check) and check.doc.startswith("Warns when the open-file limit")
    exec(compile(blocks[1], f"{PAGE}:test", "exec"), namespace)  # noqa: S102
    tests = [fn for name, fn in namespace.items() if name.startswith("test_") and callable(fn)]
    assert tests
    for fn in tests:
        fn()
    # and on this host through the one registry
    from ddp_doctor.checks import registry
    from ddp_doctor.env import checks as host
    from ddp_doctor.env.probes import system

    units = sorted((*registry.ALL, check), key=lambda unit: unit.order)
    results = {r.id: r for r in registry.evaluate(host.HostSubject({"ulimits": system.ulimits()}), units=units)}
    assert results["env.nofile"].status in (Status.PASS, Status.WARN, Status.SKIP)


@pytest.mark.slow
def test_adding_the_example_is_one_unit_file_and_nothing_else(tmp_path: Path) -> None:
    """The page's two steps on a copy of the package: the unit file is saved, and with nothing else
    changed `check --static` reports it in its place and the generated docs page documents it."""
    copy = tmp_path / "ddp_doctor"
    shutil.copytree(SRC, copy, ignore=shutil.ignore_patterns("__pycache__"))
    unit = copy / "checks" / "units" / "nofile.py"
    unit.write_text(_section_blocks("Add a check")[0], encoding="utf-8")
    added = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.py")} - {
        p.relative_to(SRC.parent) for p in SRC.rglob("*.py")
    }
    assert added == {Path("ddp_doctor/checks/units/nofile.py")}, "the one file is all that differs"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "COLUMNS": "100"}
    page = tmp_path / "checks.md"
    docs = [sys.executable, "-m", "ddp_doctor.checks.docs", "--output", str(page)]
    subprocess.run(docs, env=env, check=True, timeout=120, capture_output=True)
    assert '<a id="nofile"></a>' in page.read_text(encoding="utf-8")
    assert "Warns when the open-file limit is under 4096" in page.read_text(encoding="utf-8")
    check = [sys.executable, "-m", "ddp_doctor", "check", "--static", "--format", "json"]
    run = subprocess.run(check, check=False, env=env, timeout=240, capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    ids = [r["id"] for r in json.loads(run.stdout)["results"]]
    assert "env.nofile" in ids
    assert ids.index("env.ulimits") < ids.index("env.nofile"), "order 155 places it after ulimits (150)"
    if "env.container" in ids:
        assert ids.index("env.nofile") < ids.index("env.container")


def test_the_example_launch_target_renders_a_real_spec() -> None:
    (block,) = _section_blocks("Add a launch target")
    namespace: dict[str, Any] = {"__name__": "contributing_target"}
    exec(compile(block, f"{PAGE}:target", "exec"), namespace)  # noqa: S102
    from ddp_doctor.deploy.spec import LaunchSpec

    text = namespace["render"](LaunchSpec(image="example/train:1"))
    assert "--device nvidia.com/gpu=all" in text and "example/train:1" in text
