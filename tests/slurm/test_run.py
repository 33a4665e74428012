"""`ddp-doctor run` under srun on the real two-node Slurm: no --nnodes/--node-rank/--gather given, node 0
of the step gathers one report from Slurm's variables; `--exit-code verdict` drives a requeue script."""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.jobwatch.runner import JOB
from tests.slurm.cluster import Slurm

pytestmark = [pytest.mark.root, pytest.mark.slow]

JOB_S = 120
VENV = Path(sys.executable).parent.parent


def _script(job_dir: Path, mode: str, doctor: str = "") -> Path:
    shutil.copy(JOB, job_dir / "train.py")
    script = job_dir / "run.sbatch"
    task = (
        f'exec ddp-doctor run {doctor} --format json --output "$PWD/report-$SLURM_NODEID.json" '
        '--run-dir "$PWD/run-$SLURM_NODEID" -- '
        "torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d "
        '--rdzv-endpoint "$RDZV_HOST:29500" --rdzv-id "$SLURM_JOB_ID" --monitor-interval 0.2 '
        f"train.py --mode {mode} --bad-rank 1"
    )
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --ntasks-per-node=1\n"
        "#SBATCH --output=%x-%j.out\n"
        f"source {VENV}/bin/activate\n"
        'export RDZV_HOST=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)\n'
        f"srun --no-kill bash -c '{task}'\n"
    )
    return script


def _run(slurm: Slurm, job_dir: Path, mode: str, doctor: str = "") -> tuple[dict[str, Any], dict[str, Any], str]:
    job = slurm.sbatch(_script(job_dir, mode, doctor))
    end = slurm.wait(job, JOB_S)
    out = (job_dir / f"run.sbatch-{job}.out").read_text()
    reports = [job_dir / f"report-{n}.json" for n in (0, 1)]
    assert all(p.exists() for p in reports), (end, out[-3000:])
    node0, node1 = (json.loads(p.read_text()) for p in reports)
    return node0, node1, out


def _by_id(report: dict[str, Any], id_: str) -> list[dict[str, Any]]:
    return [r for r in report["results"] if r["id"] == id_]


def test_a_healthy_job_gives_one_report_with_no_gather_flags(slurm: Slurm, job_dir: Path) -> None:
    node0, node1, _ = _run(slurm, job_dir, "healthy")
    (gathered,) = _by_id(node0, "run.gather")
    assert gathered["status"] == "pass" and gathered["summary"] == "2 of 2 nodes reported", gathered
    assert node0["facts"]["slurm"]["gather"] == f"node0:{29600 + int(node0['facts']['slurm']['job_id']) % 300}"
    assert (node0["facts"]["slurm"]["node_rank"], node1["facts"]["slurm"]["node_rank"]) == (0, 1)
    assert node1["facts"]["gather"]["sent_to"] == node0["facts"]["slurm"]["gather"]
    assert {n["host"] for n in node0["facts"]["nodes"].values()} == {"node0", "node1"}
    assert node0["facts"]["run"]["exit_class"] == "ok" and "failed_node" not in node0["facts"]["run"]


def test_a_raising_rank_on_node1_is_named_in_node0s_report(slurm: Slurm, job_dir: Path) -> None:
    node0, _, _ = _run(slurm, job_dir, "raise")
    failures = _by_id(node0, "run.failure")
    assert failures and (failures[0]["rank"], failures[0]["node"]) == (1, "node1"), failures
    assert "ValueError: bad batch at step 2 on rank 1" in failures[0]["summary"]
    assert node0["root_cause"] == "run.failure"
    assert node0["facts"]["run"]["exit_class"] == "job_failed" and node0["facts"]["run"]["failed_node"] == "node1"


def test_a_hang_is_reported_across_both_nodes_within_its_deadline(slurm: Slurm, job_dir: Path) -> None:
    # Each node's doctor judges the silence on its own; with one threshold everywhere, whichever looks first
    # ends the job (--on-hang kill). Node1, where the rank that is behind runs, looks first here (4 s against
    # node 0's 24 s), so the test is not a race between the two.
    started = time.monotonic()
    flags = '--hang-after "$((24 - 20 * SLURM_NODEID))" --on-hang kill --stack-sample 0'
    node0, node1, _ = _run(slurm, job_dir, "hang", flags)
    took = time.monotonic() - started
    hangs = _by_id(node0, "run.hang")
    assert node0["facts"]["run"]["exit_class"] == "hang", [(r["id"], r["summary"][:200]) for r in node0["results"]]
    # Rank 1 on node1 sits in its data loader: node1's hang, in node 0's report, names it.
    behind = [r for r in hangs if (r.get("node"), r.get("rank")) == ("node1", 1) and r["status"] == "fail"]
    assert behind and "rank 1 is running load_batch" in behind[0]["summary"], hangs
    assert took < JOB_S
    assert node1["facts"]["slurm"]["node_rank"] == 1


REQUEUE = """#!/bin/bash
#SBATCH --nodes=1
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out
source {venv}/bin/activate
export RUNS="ddp-doctor-runs/$SLURM_JOB_ID.${{SLURM_RESTART_COUNT:-0}}"
{block}"""


def _requeue_block() -> str:
    """The requeue part of docs/run.md's script, verbatim (one node here: the doctor's own run dir)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "run.md").read_text()
    block = re.search(r"# --- requeue on an infrastructure failure ---\n(.*?)\n# ---\n", doc, re.DOTALL)
    assert block, "docs/run.md lost its requeue script"
    return block.group(1) + "\n"


def test_an_infrastructure_failure_requeues_the_job_without_its_node(slurm: Slurm, job_dir: Path) -> None:
    # The job's first run fails as NCCL does on a broken network (ncclSystemError); the requeued one passes.
    (job_dir / "job.py").write_text(
        "import os, sys\n"
        "if os.environ.get('SLURM_RESTART_COUNT', '0') == '0':\n"
        "    print('torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system "
        "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5', file=sys.stderr)\n"
        "    print('ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device "
        "error.', file=sys.stderr)\n"
        "    sys.exit(1)\n"
        "print('trained on', os.uname().nodename)\n"
    )
    script = job_dir / "requeue.sbatch"
    block = re.sub(r"torchrun .*?train\.py", "python job.py", _requeue_block(), flags=re.DOTALL)
    script.write_text(REQUEUE.format(venv=VENV, block=block))
    job = slurm.sbatch(script)
    first: dict[str, str] = {}
    end_by = time.monotonic() + JOB_S
    while time.monotonic() < end_by:
        first = slurm.job(job)
        if first.get("Restarts") == "1" and first.get("JobState") == "PENDING":
            break
        time.sleep(0.5)
    assert first.get("Restarts") == "1", first
    bad = first["ExcNodeList"]
    assert bad in ("node0", "node1"), first
    # Slurm holds a requeued batch job for about two minutes (Reason=BeginTime); the test does not wait for it.
    slurm.run(["scontrol", "update", f"JobId={job}", "StartTime=now"])
    end = slurm.wait(job, JOB_S)
    out = (job_dir / f"requeue.sbatch-{job}.out").read_text()
    assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), out
    other = "node1" if bad == "node0" else "node0"
    assert f"ddp-doctor: infrastructure failure on {bad}; requeued without it" in out
    assert f"trained on {other}" in out and end.fields["NodeList"] == other
