from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: str | Path | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m ddp_doctor ARGS` as a real process, as a user would."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "ddp_doctor", *args],
        capture_output=True, text=True, env=full_env, timeout=timeout, cwd=cwd, input=input,
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    is_root = os.geteuid() == 0
    has_gpu = Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()
    for item in items:
        if "root" in item.keywords and not is_root:
            item.add_marker(pytest.mark.skip(reason="needs root"))
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU; see the recorded fixtures"))
