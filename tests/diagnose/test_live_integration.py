"""End to end: `ddp-doctor check` in a 64 MB /dev/shm namespace; the failing live phase carries the diagnosis."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ddp_doctor.diagnose import signature


@pytest.mark.root
@pytest.mark.slow
def test_check_in_small_shm_names_shm_exhausted() -> None:
    cmd = [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        f"mount -t tmpfs -o size=64m tmpfs /dev/shm && exec {sys.executable} -m ddp_doctor check --format json --timeout 120",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=170, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    live = [r for r in report["results"] if r["id"].startswith("live.") and r["status"] == "fail"]
    assert live, [r["id"] for r in report["results"]]
    diagnosed = [r for r in live if (r["observed"].get("diagnosis") or [None])[0] == "diag.shm_exhausted"]
    assert diagnosed, [(r["id"], r["observed"].get("diagnosis")) for r in live]
    entry = signature("diag.shm_exhausted")
    assert entry is not None and diagnosed[0]["remedy"] == entry.remedy  # the same remedy explain gives
