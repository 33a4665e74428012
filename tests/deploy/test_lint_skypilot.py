"""SkyPilot task YAML is read (resources.accelerators, num_nodes, setup/run through the shell reader
with SkyPilot's own variables, envs, file_mounts, volumes) and judged by the rules of any launcher;
YAML that is no format lint reads is one line and exit 2."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddp_doctor.deploy.lint.engine import lint_file
from tests.conftest import FIXTURES, run_cli

REAL = FIXTURES / "deploy" / "real"


def _found(path: Path) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for r in lint_file(str(path)).results:
        out.setdefault(r.id, []).append((r.evidence[0].line or 0, str(r.observed["severity"])))
    return out


def test_the_real_distributed_examples_are_read_and_right() -> None:
    for name in ("skypilot-distributed-pytorch-train.yaml", "skypilot-distributed-pytorch-train-rdzv.yaml"):
        found = lint_file(str(REAL / name))
        assert found.kind == "skypilot"
        (task,) = found.units
        assert task.gpus is not None and task.gpus.value == 2 and task.nodes is not None and task.nodes.value == 2
        (launch,) = task.launches  # `command -v torchrun` names it without running it
        assert launch.nproc is not None and launch.nproc.value == "2"  # $SKYPILOT_NUM_GPUS_PER_NODE
        assert launch.nnodes is not None and launch.nnodes.value == "2"  # $SKYPILOT_NUM_NODES
        # Nothing outlives the cluster: checkpoints and logs are on the nodes' disks.
        assert set(_found(REAL / name)) == {"lint.skypilot.no_log_volume"}, name


def test_pitfalls_in_a_task(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(
        textwrap.dedent(
            """
            name: bad
            num_nodes: 2
            resources:
              accelerators: {A100: 4}
              image_id: docker:nvcr.io/nvidia/pytorch:latest
            envs:
              NPROC: 8
            run: |
              torchrun --standalone --nproc_per_node=$NPROC train.py
            ---
            name: nogpu
            num_nodes: 2
            file_mounts:
              /ckpt: {source: s3://ck, mode: MOUNT}
            run: |
              torchrun --nnodes 2 --nproc_per_node 8 --backend nccl --master_addr localhost t.py
            """
        ).lstrip("\n")
    )
    found = _found(path)
    assert found["lint.skypilot.latest_tag"] == [(5, "warning")]
    assert found["lint.skypilot.nproc_exceeds_gpus"] == [(9, "error")]  # $NPROC from envs, on A100:4
    assert found["lint.skypilot.standalone_multinode"] == [(9, "error")]
    assert "lint.skypilot.nnodes_mismatch" not in found  # --standalone is the mistake, said once
    assert found["lint.skypilot.gpus_missing"] == [(15, "error")]  # nccl, and no accelerators (at run:)
    assert found["lint.skypilot.master_addr_localhost"] == [(16, "error")]
    assert [line for line, _ in found["lint.skypilot.no_log_volume"]] == [8]  # the MOUNT bucket keeps outputs


def test_yaml_of_no_known_format_is_one_line_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "values.yaml"
    path.write_text("replicaCount: 2\nimage: {repository: x}\n")
    proc = run_cli("lint", str(path))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    for fmt in ("Kubernetes manifest", "compose file", "SkyPilot task", "Dockerfile", "Slurm script"):
        assert fmt in proc.stderr


_RAY_TRAIN = """
resources:
  accelerators: L4:2
num_nodes: 2
run: |
  HEAD_IP=`echo "$SKYPILOT_NODE_IPS" | head -n1`
  if [ "$SKYPILOT_NODE_RANK" == "0" ]; then
    ray start --head --port 6379
    python train.py {flags}
  else
    ray start --address $HEAD_IP:6379
  fi
"""


@pytest.mark.parametrize(
    ("flags", "idle"),
    [
        ("--num-workers $SKYPILOT_NUM_NODES --use-gpu", True),  # 2 workers on 4 GPUs
        ("--num-workers 4 --use-gpu", False),
        ("--num_workers 2", False),  # a DataLoader's workers, for all lint knows: no --use-gpu
        ("--num-workers $SKYPILOT_NUM_NODES", True),  # Ray's own flag on the GPU cluster the task asked for
        ("--num-workers $((SKYPILOT_NUM_NODES * SKYPILOT_NUM_GPUS_PER_NODE))", False),
        ("--num-workers 3 --use-gpu", True),  # 3 workers on 4 GPUs, packed unevenly
        ("--num-workers 2 --use-cpu", False),
    ],
)
def test_ray_train_workers_against_the_clusters_gpus(tmp_path: Path, flags: str, idle: bool) -> None:
    """Ray Train's --num-workers N starts N workers in all, one GPU each, on the task's Ray cluster of GPU nodes
    (--use-gpu, or nothing said of GPUs: the task asked for them to train on)."""
    path = tmp_path / "ray-train.yaml"
    path.write_text(_RAY_TRAIN.format(flags=flags).lstrip())
    found = {r.id for r in lint_file(str(path)).results}
    assert ("lint.skypilot.nproc_below_gpus" in found) is idle, found
