"""The one torchrun command builder (ddp_doctor.torchrun): its argv, and real torchrun accepting it."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_doctor.deploy.serialize import Expand
from ddp_doctor.torchrun import TorchrunCommand, argv


def test_one_node_is_standalone() -> None:
    assert argv(TorchrunCommand("train.py", ("--lr", "0.1"), nproc="gpu")) == [
        "torchrun",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc-per-node",
        "gpu",
        "train.py",
        "--lr",
        "0.1",
    ]


def test_several_nodes_meet_at_a_c10d_rendezvous() -> None:
    cmd = TorchrunCommand(
        "ddp_doctor.live.worker",
        ("--backend", "gloo"),
        module=True,
        nproc="2",
        nnodes="1:4",
        rdzv_endpoint="node0:29500",
        rdzv_id="job1",
        join_timeout_s=0.4,
        max_restarts=0,
        monitor_interval_s=0.1,
        log_dir="/run/x/torchelastic",
        launcher=("/venv/bin/python", "-m", "torch.distributed.run"),
    )
    assert argv(cmd) == [
        "/venv/bin/python",
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "1:4",
        "--nproc-per-node",
        "2",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        "node0:29500",
        "--rdzv-id",
        "job1",
        "--rdzv-conf",
        "join_timeout=1",
        "--max-restarts",
        "0",
        "--monitor-interval",
        "0.1",
        "--log-dir",
        "/run/x/torchelastic",
        "-m",
        "ddp_doctor.live.worker",
        "--backend",
        "gloo",
    ]


def test_words_a_shell_expands_stay_marked() -> None:
    out = argv(TorchrunCommand("t.py", nnodes="2", rdzv_endpoint=Expand("${HOST}:29500"), rdzv_id=Expand("$ID")))
    assert [type(w) for w in out if "$" in w] == [Expand, Expand]


def test_several_nodes_without_an_endpoint_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a rendezvous endpoint"):
        TorchrunCommand("t.py", nnodes="2")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("rendezvous", ["standalone", "c10d"])
def test_real_torchrun_runs_the_built_command(tmp_path: Path, rendezvous: str) -> None:
    script = tmp_path / "train.py"
    # Each rank writes a file of its own: two ranks printing into one pipe can interleave their lines.
    out = tmp_path / "out"
    out.mkdir()
    script.write_text(
        "import os, pathlib, sys\n"
        f"pathlib.Path({str(out)!r}, 'rank-' + os.environ['RANK']).write_text("
        "' '.join(['world', os.environ['WORLD_SIZE'], 'rank', os.environ['RANK'], *sys.argv[1:]]))\n"
    )
    endpoint = f"127.0.0.1:{_free_port()}" if rendezvous == "c10d" else None
    cmd = TorchrunCommand(
        str(script),
        ("--flag", "x"),
        nproc="2",
        rdzv_endpoint=endpoint,
        rdzv_id="t" if endpoint else None,
        join_timeout_s=30 if endpoint else None,
        max_restarts=0,
        monitor_interval_s=0.1,
        log_dir=str(tmp_path / "logs"),
        launcher=(sys.executable, "-m", "torch.distributed.run"),
    )
    done = subprocess.run(
        argv(cmd),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert sorted(f.read_text() for f in out.iterdir()) == [
        "world 2 rank 0 --flag x",
        "world 2 rank 1 --flag x",
    ]
