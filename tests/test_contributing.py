"""CONTRIBUTING.md's worked example of a check is real: its code blocks are executed here, the
declared unit is run on typed facts, and the example's own test passes."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.checks.model import Check
from ddp_doctor.report import Status

PAGE = Path(__file__).resolve().parent.parent / "CONTRIBUTING.md"


def _section_blocks(title: str) -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    section = text.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_example_check_runs_and_its_test_passes(monkeypatch: pytest.MonkeyPatch) -> None:
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
    # and on this host through the one registry, with nothing registered but the unit itself
    from ddp_doctor.checks import registry
    from ddp_doctor.env import checks as host
    from ddp_doctor.env.probes import system

    monkeypatch.setattr(registry, "ALL", (*registry.ALL, check))
    results = {r.id: r for r in host.evaluate({"ulimits": system.ulimits()})}
    assert results["env.nofile"].status in (Status.PASS, Status.WARN, Status.SKIP)


def test_the_example_launch_target_renders_a_real_spec() -> None:
    (block,) = _section_blocks("Add a launch target")
    namespace: dict[str, Any] = {"__name__": "contributing_target"}
    exec(compile(block, f"{PAGE}:target", "exec"), namespace)  # noqa: S102
    from ddp_doctor.deploy.spec import LaunchSpec

    text = namespace["render"](LaunchSpec(image="example/train:1"))
    assert "--device nvidia.com/gpu=all" in text and "example/train:1" in text
