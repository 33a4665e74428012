from __future__ import annotations

import pytest

from tests.conftest import run_cli

BASE = ("check", "--backend", "gloo", "--nproc", "1")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--nnodes", "2"), "--nnodes 2 needs --rdzv-endpoint HOST:PORT"),
        (("--nnodes", "2", "--rdzv-endpoint", "node0:29500"), "--nnodes 2 needs --node-rank R"),
        (
            ("--nnodes", "two", "--rdzv-endpoint", "node0:29500", "--node-rank", "0"),
            "--nnodes 'two': expected N or MIN:MAX",
        ),
        (("--nnodes", "3:2", "--rdzv-endpoint", "node0:29500"), "expected 1 <= MIN <= MAX"),
        (("--nnodes", "2", "--rdzv-endpoint", "node0:http", "--node-rank", "0"), "port 'http' is not a number"),
        (("--nnodes", "2", "--rdzv-endpoint", "node0:29500", "--node-rank", "2"), "--node-rank 2 is outside 0..1"),
        (
            ("--nnodes", "2", "--rdzv-endpoint", "node0:29500", "--node-rank", "0", "--master-port", "29501"),
            "--master-port is for one node",
        ),
        (
            (
                "--nnodes",
                "2",
                "--rdzv-endpoint",
                "node0:29500",
                "--node-rank",
                "0",
                "--timeout",
                "30",
                "--join-timeout",
                "30",
            ),
            "--join-timeout 30 must be shorter than --timeout 30",
        ),
    ],
)
def test_bad_multinode_flags_are_one_line_exit_2(flags: tuple[str, ...], message: str) -> None:
    proc = run_cli(*BASE, *flags, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr
