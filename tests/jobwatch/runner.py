"""Run `ddp-doctor run` as users do: a subprocess of the CLI wrapping a real torchrun + gloo job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("jobs") / "train.py"
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))


@dataclass
class Ran:
    returncode: int
    stdout: bytes
    stderr: bytes
    report: dict[str, Any]
    run_dir: Path
    seconds: float

    def result(self, rid: str) -> dict[str, Any]:
        found = [r for r in self.report["results"] if r["id"] == rid]
        assert found, f"no {rid} in {[r['id'] for r in self.report['results']]}"
        return found[0]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT / "src")
    e.pop("NCCL_DEBUG", None)
    return e


def job_copy(tmp: Path) -> Path:
    """The job script copied under tmp, so its path (in every rank's argv) is unique to this test."""
    target = tmp / "job" / "train.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(JOB, target)
    return target


def torchrun(job: Path, nproc: int = 2, *job_args: str) -> list[str]:
    return [TORCHRUN, "--nproc-per-node", str(nproc), "--monitor-interval", "0.2", str(job), *job_args]


NOPTRACE = Path(__file__).with_name("noptrace.py")


def run_doctor(
    tmp: Path,
    doctor_args: list[str],
    command: list[str],
    timeout: float = 240,
    extra_env: dict[str, str] | None = None,
    wrap: list[str] | None = None,
) -> Ran:
    """wrap: a prefix for the doctor's own argv (e.g. noptrace.py: the doctor and its job where ptrace is refused)."""
    run_dir = tmp / "run"
    report = tmp / "report.json"
    argv = [*(wrap or []), sys.executable, "-m", "ddp_doctor", "run", "--run-dir", str(run_dir), "--format", "json"]
    argv += ["--output", str(report), *doctor_args, "--", *command]
    t0 = time.monotonic()
    done = subprocess.run(
        argv, capture_output=True, env={**env(), **(extra_env or {})}, cwd=tmp, timeout=timeout, check=False
    )
    seconds = time.monotonic() - t0
    data = json.loads(report.read_text()) if report.exists() else {}
    assert data, f"no report; stderr: {done.stderr.decode(errors='replace')[-3000:]}"
    return Ran(done.returncode, done.stdout, done.stderr, data, run_dir, seconds)


def processes_with(marker: str) -> list[str]:
    """Command lines of living processes that mention marker (a test's unique path): orphans."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found.append(f"{entry}: {cmd}")
    return found
