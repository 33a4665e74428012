from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DOCTOR = Path(sys.executable).with_name("ddp-doctor")
"""The installed console script, as users start it."""


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: str | Path | None = None,
    input: str | None = None,
    preexec_fn: Callable[[], object] | None = None,
    console: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m ddp_doctor ARGS` (with `console`, the installed `ddp-doctor` script) as a real
    process, as a user would."""
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run(
        [*([str(DOCTOR)] if console else [sys.executable, "-m", "ddp_doctor"]), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=cwd,
        input=input,
        preexec_fn=preexec_fn,
        check=False,
    )


# Linux hands a process the peak RSS of the image it exec'd from, so a child of a large pytest
# process reports pytest's size. A small Python in between forks the measured command itself.
_PEAK_RSS_PROBE = (
    "import os, subprocess, sys\n"
    "with open(sys.argv[1], 'wb') as out:\n"
    "    p = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL)\n"
    "    _, status, usage = os.wait4(p.pid, 0)\n"
    "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024)\n"
)


def run_measuring_peak_rss(argv: list[str], stdout_path: Path, timeout: float = 300) -> tuple[int, int]:
    """Run argv with stdout to a file; return (exit code, peak RSS in bytes of that process alone)."""
    probe = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS_PROBE, str(stdout_path), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    code, rss = probe.stdout.split()
    return int(code), int(rss)


# Tests measured slow (tests/slow.txt, written by `python -m tests.tiers` from pytest's --durations): marked
# `slow` here, before `-m "not slow"` deselects, so the fast tier stays fast without editing every file.
SLOW = frozenset(
    line.strip()
    for line in (Path(__file__).with_name("slow.txt")).read_text(encoding="utf-8").splitlines()
    if line.strip() and not line.startswith("#")
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    is_root = os.geteuid() == 0
    has_gpu = Path("/dev/nvidia0").exists() or Path("/dev/nvidiactl").exists()
    for item in items:
        if item.nodeid in SLOW:
            item.add_marker(pytest.mark.slow)
        if "root" in item.keywords and not is_root:
            item.add_marker(pytest.mark.skip(reason="needs root"))
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU; see the recorded fixtures"))
