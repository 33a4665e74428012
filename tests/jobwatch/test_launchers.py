"""`ddp-doctor run -- accelerate launch ...` and `-- deepspeed ...`: the real launchers on CPU (gloo), two processes.

accelerate 1.x runs `--cpu` as ONE process (its simple launcher); two CPU processes are `--multi_gpu
--num_processes 2` with `Accelerator(cpu=True)` in the script: accelerate then starts torch.distributed.run
in its own process, whose workers get RANK, so the startup hook treats them as ranks.
deepspeed's runner starts `python -m deepspeed.launcher.launch`, which spawns one process per rank with RANK set.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jobwatch.runner import processes_with, run_doctor

pytestmark = pytest.mark.slow

ACCELERATE = Path(sys.executable).with_name("accelerate")
JOB = Path(__file__).with_name("jobs") / "accel_train.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accelerate(tmp: Path, *job_args: str) -> tuple[list[str], Path]:
    job = tmp / "job" / "accel_train.py"  # a path unique to this test: the orphan check looks for it
    job.parent.mkdir(parents=True, exist_ok=True)
    job.write_bytes(JOB.read_bytes())
    cmd = [str(ACCELERATE), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    cmd += ["--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(_free_port())]
    return [*cmd, str(job), *job_args], job


@pytest.mark.skipif(not ACCELERATE.exists(), reason="accelerate (a dev dependency) is not installed beside python")
def test_accelerate_launch_healthy_two_ranks_found_with_their_logs(tmp_path: Path) -> None:
    cmd, job = _accelerate(tmp_path, "--steps", "6")
    ran = run_doctor(tmp_path, ["--exit-code", "verdict"], cmd)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.report["verdict"] == "pass", [(r["id"], r["status"], r["summary"]) for r in ran.report["results"]]
    facts = ran.report["facts"]["run"]
    assert set(facts["ranks"]) == {"0", "1"} and facts["exit_class"] == "ok"
    for rank in (0, 1):
        log = (ran.run_dir / f"rank-{rank}.log").read_text()
        assert f"rank {rank} step 5" in log and f"rank {rank} done" in log
    assert b"rank 0 done" in ran.stdout and b"rank 1 done" in ran.stdout  # the job's output passes through
    assert not processes_with(str(job))


@pytest.mark.skipif(not ACCELERATE.exists(), reason="accelerate (a dev dependency) is not installed beside python")
def test_accelerate_launch_rank_that_raises_is_the_first_failure(tmp_path: Path) -> None:
    cmd, job = _accelerate(tmp_path, "--mode", "raise")
    ran = run_doctor(tmp_path, ["--exit-code", "verdict"], cmd)
    failure = ran.result("run.failure")
    assert ran.report["root_cause"] == "run.failure"
    assert failure["rank"] == 1 and failure["phase"] == "training step (user code)", failure
    assert "ValueError: bad batch at step 2 on rank 1" in failure["summary"]
    assert ran.report["facts"]["run"]["exit_class"] == "job_failed"
    assert ran.returncode == 1  # --exit-code verdict: job failed (not 11: rank 0's lost peer is a consequence)
    assert "rank 1 step 2" in (ran.run_dir / "rank-1.log").read_text()
    assert "Traceback" in (ran.run_dir / "rank-1.error.json").read_text()
    assert not processes_with(str(job))


DEEPSPEED = Path(sys.executable).with_name("deepspeed")
DS_JOB = Path(__file__).with_name("jobs") / "ds_train.py"
DS_ENV = {"DS_ACCELERATOR": "cpu"}


@pytest.fixture(scope="module")
def deepspeed_ready() -> None:
    """DeepSpeed on CPU builds its shared-memory comm op once (C++, minutes on a busy machine; cached in
    ~/.cache/torch_extensions): build it here, so the watched runs time only the job."""
    if not DEEPSPEED.exists():
        pytest.skip("deepspeed (a dev dependency) is not installed beside python")
    done = subprocess.run(
        [sys.executable, "-c", "from deepspeed.comm.torch import build_shm_op; assert build_shm_op() is not None"],
        env={**os.environ, **DS_ENV},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(autouse=True)
def _no_deepspeed_shm_left() -> Iterator[None]:
    """DeepSpeed's CPU comm op maps /dev/shm/deepspeed_allreduce_buffer_* per rank and never unlinks them (each run
    left two); the job's own leftovers, removed here so no test leaves a segment behind."""
    shm = Path("/dev/shm")
    before = set(shm.glob("deepspeed_allreduce_buffer_*"))
    yield
    for left in set(shm.glob("deepspeed_allreduce_buffer_*")) - before:
        left.unlink(missing_ok=True)


def _deepspeed(tmp: Path, *job_args: str) -> tuple[list[str], Path]:
    job = tmp / "job" / "ds_train.py"
    job.parent.mkdir(parents=True, exist_ok=True)
    job.write_bytes(DS_JOB.read_bytes())
    return [str(DEEPSPEED), "--num_gpus", "2", "--master_port", str(_free_port()), str(job), *job_args], job


def test_deepspeed_launch_healthy_two_ranks_found_with_their_logs(tmp_path: Path, deepspeed_ready: None) -> None:
    cmd, job = _deepspeed(tmp_path)
    ran = run_doctor(tmp_path, ["--exit-code", "verdict"], cmd, extra_env=DS_ENV)
    assert ran.returncode == 0, ran.stderr[-3000:]
    # The job ran well; the one warning is what it leaves in /dev/shm (DeepSpeed's CPU comm buffers, never unlinked).
    statuses = {r["id"]: r["status"] for r in ran.report["results"]}
    assert ran.report["verdict"] == "warn" and statuses.pop("run.cleanup") == "warn", ran.report["results"]
    assert "fail" not in statuses.values() and "warn" not in statuses.values(), statuses
    assert "deepspeed_allreduce_buffer_" in ran.result("run.cleanup")["summary"]
    facts = ran.report["facts"]["run"]
    assert set(facts["ranks"]) == {"0", "1"} and facts["exit_class"] == "ok"
    for rank in (0, 1):
        assert f"rank {rank} done" in (ran.run_dir / f"rank-{rank}.log").read_text()
    assert not processes_with(str(job))


def test_deepspeed_launch_rank_that_raises_is_the_first_failure(tmp_path: Path, deepspeed_ready: None) -> None:
    cmd, job = _deepspeed(tmp_path, "--mode", "raise")
    ran = run_doctor(tmp_path, ["--exit-code", "verdict"], cmd, extra_env=DS_ENV)
    failure = ran.result("run.failure")
    assert failure["rank"] == 1 and failure["phase"] == "training step (user code)", failure
    assert "ValueError: bad batch at step 2 on rank 1" in failure["summary"]
    assert ran.report["facts"]["run"]["exit_class"] == "job_failed" and ran.returncode == 1
    assert not processes_with(str(job))
