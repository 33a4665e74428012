"""Stack capture on a real process that the startup hook registered: py-spy, and the fallback without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_doctor.jobwatch import envplan, stacks
from ddp_doctor.jobwatch.capture import StackTaker

SCRIPT = "import time\ndef wait_here():\n    time.sleep(120)\nwait_here()\n"


@pytest.fixture
def hooked(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A lone Python process started with the hook on PYTHONPATH (as `ddp-doctor run -- python x.py` starts it)."""
    script = tmp_path / "x.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": envplan.HOOK_DIR,
        "DDP_DOCTOR_WATCH_DIR": str(run_dir),
        "DDP_DOCTOR_WATCH_LONE": "1",
    }
    env.pop("RANK", None)
    proc = subprocess.Popen([sys.executable, str(script)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not (run_dir / "rank-0.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads((run_dir / "rank-0.pid").read_text())["pid"] == proc.pid
        time.sleep(0.3)  # into wait_here()
        yield run_dir, proc.pid
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_auto_falls_back_to_the_hook_when_py_spy_cannot_run(
    hooked: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir, pid = hooked
    # py-spy absent (a container image without it): the path lookup finds nothing, the hook's faulthandler answers.
    monkeypatch.setattr(stacks, "pyspy_path", lambda: None)
    taker = StackTaker(run_dir, "auto")
    got = taker.capture({0: pid}, hook_stacks=True)
    assert got[0].method == "faulthandler"
    assert [f.func for f in got[0].frames][:2] == ["wait_here", "<module>"]
    assert taker.notes == ["py-spy is not installed"]


@pytest.mark.skipif(stacks.pyspy_path() is None, reason="py-spy (a dependency) is not installed in this environment")
def test_py_spy_takes_the_stack_when_allowed(hooked: tuple[Path, int]) -> None:
    run_dir, pid = hooked
    got = StackTaker(run_dir, "py-spy").capture({0: pid}, hook_stacks=False)
    assert got[0].method == "py-spy"
    assert got[0].frames[0].func == "wait_here" and got[0].frames[0].file.endswith("x.py")
    assert stacks.classify(got[0].frames).label.startswith("running wait_here")


def test_the_hook_stack_signal_never_kills_a_process_without_the_hook(tmp_path: Path) -> None:
    # SIGURG's default action is to ignore it: a sample that arrives before the hook (or after exit) is harmless.
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    try:
        time.sleep(0.5)
        assert stacks.ask_faulthandler(proc.pid)
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()


def test_the_users_own_sitecustomize_still_runs(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{envplan.HOOK_DIR}{os.pathsep}{mine}", "DDP_DOCTOR_WATCH_DIR": str(run_dir)}
    env["DDP_DOCTOR_WATCH_LONE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", "import os, sys; print(os.environ.get('USER_SITECUSTOMIZE_RAN'), type(sys.stdout).__name__)"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert done.stdout.split() == ["1", "_Tee"]
    assert (run_dir / "rank-0.log").read_text().startswith("1 _Tee")
