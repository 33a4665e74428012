"""The test Slurm itself: a batch job spans both namespace nodes; its end state and output are read back;
nothing of the cluster outlives close()."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.multinode import netns
from tests.slurm.cluster import Slurm, available

pytestmark = [pytest.mark.root, pytest.mark.slow]

JOB_S = 30


def test_a_batch_job_runs_one_task_on_each_node(slurm: Slurm, job_dir: Path) -> None:
    script = job_dir / "hello.sbatch"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --ntasks-per-node=1\n"
        "#SBATCH --output=%x-%j.out\n"
        "srun bash -c 'echo task $SLURM_NODEID on $(hostname) of $SLURM_NNODES in $SLURM_JOB_NODELIST'\n"
    )
    job = slurm.sbatch(script)
    end = slurm.wait(job, JOB_S)
    assert (end.state, end.status) == ("COMPLETED", 0), slurm.logs()
    lines = sorted((job_dir / f"hello.sbatch-{job}.out").read_text().splitlines())
    assert lines == ["task 0 on node0 of 2 in node[0-1]", "task 1 on node1 of 2 in node[0-1]"]
    assert slurm.jobcomp(job)["JobState"] == "COMPLETED"
    assert slurm.jobcomp(job)["NodeList"] == "node[0-1]"
    # No slurmdbd here (it needs MySQL/MariaDB): sacct says so instead of answering.
    sacct = slurm.run(["sacct", "-j", job], check=False)
    assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stderr


def test_a_failing_batch_script_is_failed_with_its_exit_status(slurm: Slurm, job_dir: Path) -> None:
    script = job_dir / "fail.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --output=%x-%j.out\necho before\nexit 3\n")
    job = slurm.sbatch(script)
    end = slurm.wait(job, JOB_S)
    assert (end.state, end.exit_code) == ("FAILED", "3:0")
    assert slurm.jobcomp(job)["JobState"] == "FAILED"
    assert (job_dir / f"fail.sbatch-{job}.out").read_text() == "before\n"


def test_close_leaves_no_daemon_namespace_or_state() -> None:
    reason = available()
    if reason:
        pytest.skip(reason)
    started = time.monotonic()
    cluster = Slurm.start()
    took = time.monotonic() - started
    pids = [p.pid for p in cluster.procs.values()]
    names = [h.netns for h in cluster.hosts] + [cluster.net.switch]
    root = cluster.root
    assert (root / "munge" / "munge.socket").exists()
    cluster.close()
    assert took < 20, f"the cluster took {took:.1f} s to come up"
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert not set(names) & set(netns._namespaces())
    assert not root.exists()
    assert not any((netns.ETC_NETNS / n).exists() for n in names)
    cluster.close()  # idempotent
