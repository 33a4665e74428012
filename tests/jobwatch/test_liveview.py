"""`ddp-doctor run --live` in a real terminal (a pty through util-linux `script`): the table names each rank."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.jobwatch.runner import env

pytestmark = pytest.mark.slow


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux `script` for a pty")
def test_live_table_shows_the_rank_running_then_ended(tmp_path: Path) -> None:
    job = "import time; print('hello', flush=True); time.sleep(4)"
    doctor = [sys.executable, "-m", "ddp_doctor", "run", "--live", "-q", "--", sys.executable, "-c", job]
    inner = shlex.join(doctor)
    ran = subprocess.run(
        ["script", "-qec", inner, "/dev/null"],
        capture_output=True,
        env=env(),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout[-2000:]
    text = ran.stdout.decode("utf-8", "replace")
    assert "ddp-doctor run ·" in text
    rows = re.findall(r"│ 0\s+│ (\d+)\s+│ (running|ended)\s+│", text)
    assert rows, text[-2000:]
    assert rows[0][1] == "running"
    assert {pid for pid, _ in rows} == {rows[0][0]}
