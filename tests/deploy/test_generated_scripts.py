"""The generated docker and Slurm scripts run as real shell scripts (with recording stand-ins for
docker, srun, scontrol and the launched command), so their quoting is proven, not eyeballed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ddp_doctor.cli import main
from tests.deploy.specs import golden_path

RECORD = '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > "$RECORD_DIR/$(basename "$0").argv"\n'
# srun: drop its own options, run the command as a task of node SLURM_NODEID
SRUN = '#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n'
SCONTROL = '#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "gpu-node-07\\ngpu-node-08\\n"\n'


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (
        ("docker", RECORD),
        ("ddp-doctor", RECORD),
        ("torchrun", RECORD),
        ("srun", SRUN),
        ("scontrol", SCONTROL),
    ):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_script(
    script: Path, fake_bin: Path, cwd: Path, env: dict[str, str], shell: str = "sh"
) -> subprocess.CompletedProcess[str]:
    full = {"PATH": f"{fake_bin}:{os.environ['PATH']}", "RECORD_DIR": str(cwd), "HOME": str(cwd), **env}
    return subprocess.run(
        [shell, str(script)], check=False, cwd=cwd, env=full, capture_output=True, text=True, timeout=30
    )


def argv(cwd: Path, name: str) -> list[str]:
    return (cwd / f"{name}.argv").read_text().splitlines()


def test_docker_single_node(fake_bin: Path, tmp_path: Path) -> None:
    proc = run_script(golden_path("1x8", "docker"), fake_bin, tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    got = argv(tmp_path, "docker")
    assert got[:2] == ["run", "--rm"]
    assert got[got.index("--volume") + 1] == "/datasets/imagenet:/data:ro"
    assert f"{tmp_path}/logs:/logs" in got and (tmp_path / "logs").is_dir()
    assert got[-5:] == ["nvcr.io/nvidia/pytorch:24.05-py3", "ddp-doctor", "check", "--nproc", "8"]


def test_docker_multi_node_needs_its_variables(fake_bin: Path, tmp_path: Path) -> None:
    script = golden_path("4x8", "docker")
    proc = run_script(script, fake_bin, tmp_path, {})
    assert proc.returncode != 0 and "NODE_RANK" in proc.stderr and not (tmp_path / "docker.argv").exists()
    proc = run_script(script, fake_bin, tmp_path, {"NODE_RANK": "3", "MASTER_ADDR": "10.0.0.1", "RUN_ID": "r42"})
    assert proc.returncode == 0, proc.stderr
    got = argv(tmp_path, "docker")
    tail = got[got.index("nvcr.io/nvidia/pytorch:24.05-py3") + 1 :]
    assert tail == [
        "ddp-doctor",
        "check",
        "--nproc",
        "8",
        "--nnodes",
        "4",
        "--node-rank",
        "3",
        "--rdzv-endpoint",
        "10.0.0.1:29500",
        "--rdzv-id",
        "doctor-4x8-r42",
    ]
    assert got[got.index("--name") + 1] == "doctor-4x8-node-3" and "host" == got[got.index("--network") + 1]
    assert "NCCL_SOCKET_IFNAME=eth0" in got


def test_docker_device_list_and_user_args_arrive_literally(fake_bin: Path, tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    assert (
        main(
            [
                "launch",
                "--target",
                "docker",
                "--image",
                "img:1",
                "--devices",
                "0,3",
                "-o",
                str(script),
                "--script",
                "my train.py",
                "--",
                "--note",
                "it's $HOME `id`",
            ]
        )
        == 0
    )
    proc = run_script(script, fake_bin, tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    got = argv(tmp_path, "docker")
    assert got[got.index("--gpus") + 1] == '"device=0,3"'
    assert got[-3:] == ["my train.py", "--note", "it's $HOME `id`"]  # the user's words arrive literally
    assert got[got.index("img:1") + 1 :][:6] == ["torchrun", "--standalone", "--nnodes", "1", "--nproc-per-node", "2"]


def test_slurm_each_task_meets_at_the_first_node(fake_bin: Path, tmp_path: Path) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu-node-[07-08]", "SLURM_NODEID": "1", "SLURM_JOB_ID": "4242", "SLURM_NNODES": "4"}
    proc = run_script(golden_path("4x8", "slurm"), fake_bin, tmp_path, env, shell="bash")
    assert proc.returncode == 0, proc.stderr
    assert argv(tmp_path, "ddp-doctor") == [
        "check",
        "--nproc",
        "8",
        "--nnodes",
        "4",
        "--node-rank",
        "1",
        "--rdzv-endpoint",
        "gpu-node-07:29500",
        "--rdzv-id",
        "4242",
        "--output",  # node 1's own report goes beside the job output; node 0's cluster report is the output
        "/logs/ddp-doctor-check-4242-node1.txt",  # the logs mount inside the pyxis container
    ]
    proc = run_script(golden_path("4x8-elastic-script", "slurm"), fake_bin, tmp_path, env, shell="bash")
    assert proc.returncode == 0, proc.stderr
    assert argv(tmp_path, "torchrun") == [
        "--nnodes",
        "2:4",
        "--nproc-per-node",
        "8",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        "gpu-node-07:29500",
        "--rdzv-id",
        "4242",
        "train.py",
        "--epochs",
        "3",
    ]
