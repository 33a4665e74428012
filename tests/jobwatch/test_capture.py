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
from ddp_doctor.jobwatch.hook import ddp_doctor_heartbeat as rankfiles

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
    # py-spy absent (a container image without it): the path lookup finds nothing, the hook's thread answers.
    monkeypatch.setattr(stacks, "pyspy_path", lambda: None)
    taker = StackTaker(run_dir, "auto")
    got = taker.capture({0: pid}, hook_stacks=True)
    assert got[0].method == "hook"
    assert [f.func for f in got[0].frames][:2] == ["wait_here", "<module>"]
    assert taker.notes == ["py-spy is not installed"]
    assert (run_dir / "rank-0.stack").read_text() == ""  # no signal was needed


def test_a_rank_holding_the_gil_is_asked_by_signal_as_the_last_resort(tmp_path: Path) -> None:
    # libc's sleep() through ctypes.PyDLL keeps the GIL: the hook's thread cannot run, so only faulthandler on
    # SIGURG (which needs no GIL) can say where the rank is.
    script = tmp_path / "gil.py"
    # The marker byte is written by libc under the GIL too, so the GIL is not let go between it and the sleep.
    marker = tmp_path / "holding"
    script.write_text(
        "import ctypes, os, sys\n"
        "libc = ctypes.PyDLL(None)\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT)\n"
        "def hold_the_gil():\n"
        "    libc.write(fd, b'x', 1)\n"
        "    libc.sleep(120)\n"
        "hold_the_gil()\n"
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = {**os.environ, "PYTHONPATH": envplan.HOOK_DIR, "DDP_DOCTOR_WATCH_DIR": str(run_dir)}
    env["DDP_DOCTOR_WATCH_LONE"] = "1"
    env.pop("RANK", None)
    proc = subprocess.Popen([sys.executable, str(script), str(marker)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        got = StackTaker(run_dir, "hook").capture({0: proc.pid}, hook_stacks=True)
        assert got[0].method == "faulthandler", got
        assert [f.func for f in got[0].frames][:2] == ["hold_the_gil", "<module>"]
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_straggler_samples_come_from_the_hook_thread_without_a_signal(hooked: tuple[Path, int]) -> None:
    run_dir, pid = hooked
    taker = StackTaker(run_dir, "auto")
    taker.request({0: pid})
    deadline = time.monotonic() + 30
    while not (run_dir / "rank-0.sample").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    got = taker.collect()
    assert [f.func for f in got[0]][:2] == ["wait_here", "<module>"]
    assert (run_dir / "rank-0.stack").read_text() == ""


def test_a_sample_answers_only_its_own_request(tmp_path: Path) -> None:
    rankfiles.ask_for_stacks(str(tmp_path), "a-1")
    text = rankfiles.stack_text("a-1", 7, None)
    (tmp_path / "rank-0.sample").write_text(text)
    assert rankfiles.read_sample(str(tmp_path), 0, "a-1") == text.partition("\n")[2]
    assert rankfiles.read_sample(str(tmp_path), 0, "a-2") is None  # an earlier answer is not a later one's
    assert rankfiles.read_sample(str(tmp_path), 1, "a-1") is None  # a rank that never answered


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
