"""`ddp-doctor run` under Slurm: the compressed host list and where this task sits, from srun's variables."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ddp_doctor.jobwatch.slurmenv import expand_hostlist, placement

LISTS = [
    "node[01-03,7]",
    "rack[1-2]-gpu[1-2]",
    "a,b[3-4],c",
    "gpu-[9-11]",
    "x[009-011]",
    "n[0-0]",
    "gpu-node-[07-08],cpu1",
]


@pytest.mark.parametrize("text", LISTS)
def test_the_host_list_expands_as_scontrol_does(text: str, tmp_path: Path) -> None:
    if shutil.which("scontrol") is None:
        pytest.skip("needs scontrol (slurm-client)")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSlurmctldHost=localhost\n")  # scontrol reads a config even to parse
    slurm = subprocess.run(
        ["scontrol", "show", "hostnames", text],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
        env={"SLURM_CONF": str(conf), "PATH": "/usr/bin:/bin"},
    )
    assert expand_hostlist(text) == slurm.stdout.split()


def test_the_host_list_by_hand() -> None:
    assert expand_hostlist("node[01-03,7]") == ["node01", "node02", "node03", "node7"]
    assert expand_hostlist("r[1-2]-g[1-2]") == ["r1-g1", "r1-g2", "r2-g1", "r2-g2"]
    for bad in ("node[1-", "node]1", "node[a-b]", "node[3-1]"):
        with pytest.raises(ValueError):
            expand_hostlist(bad)


STEP = {
    "SLURM_JOB_ID": "4242",
    "SLURM_STEP_ID": "0",
    "SLURM_JOB_NODELIST": "gpu[01-04]",
    "SLURM_STEP_NODELIST": "gpu[02-03]",
    "SLURMD_NODENAME": "gpu03",
    "SLURM_NODEID": "2",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_NTASKS": "2",
}


def test_under_srun_the_step_decides_who_gathers() -> None:
    p = placement(STEP)
    assert p is not None and p.gathers
    # The step runs on 2 of the job's 4 nodes: its own list, and this node's place in it (not SLURM_NODEID).
    assert (p.nodes, p.node_rank, p.nnodes) == (("gpu02", "gpu03"), 1, 2)
    assert p.gather == "gpu02:29642"  # 29600 + 4242 % 300


def test_when_slurm_does_not_gather() -> None:
    assert placement({}) is None
    batch = {k: v for k, v in STEP.items() if not k.startswith("SLURM_STEP")}
    p = placement(batch)
    assert p is not None and not p.gathers  # the batch script: one doctor, on the first node only
    several = {**STEP, "SLURM_STEP_NUM_TASKS": "16"}
    assert not placement(several).gathers  # type: ignore[union-attr]  # 8 tasks a node: one doctor each
    assert placement({**STEP, "SLURM_JOB_NODELIST": "bad[", "SLURM_STEP_NODELIST": "bad["}) is None
