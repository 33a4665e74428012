"""Two nodes (network namespaces on a private bridge), each under its own `ddp-doctor run`; node 0 gathers one report."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.jobwatch.runner import TORCHRUN, env, job_copy
from tests.multinode.conftest import make_cluster  # noqa: F401 - the fixture
from tests.multinode.netns import Cluster

pytestmark = [pytest.mark.slow, pytest.mark.root]


def test_two_nodes_one_report_names_the_failing_rank_on_the_other_node(
    make_cluster: Callable[[int], Cluster],  # noqa: F811
    tmp_path: Path,
) -> None:
    c = make_cluster(2)
    job = job_copy(tmp_path)
    port = random.randrange(30000, 40000)
    gather_port = port + 1
    rdzv_id = f"run{random.randrange(16**6):06x}"
    procs = []
    for h in c.hosts:
        argv = [
            sys.executable, "-m", "ddp_doctor", "run", "--nnodes", "2", "--node-rank", str(h.index),
            "--gather", f"{c.hosts[0].hostname}:{gather_port}", "--gather-timeout", "60",
            "--run-dir", str(tmp_path / f"run{h.index}"), "--format", "json",
            "--output", str(tmp_path / f"node{h.index}.json"), "--",
            TORCHRUN, "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{c.hosts[0].hostname}:{port}", "--rdzv-id", rdzv_id, "--monitor-interval", "0.2",
            str(job), "--mode", "raise", "--bad-rank", "1",
        ]  # fmt: skip
        e = {k: v for k, v in env().items() if not k.endswith("_SOCKET_IFNAME")}
        procs.append(c.popen(h, argv, env=e, cwd=tmp_path))
    errs = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        errs.append(err)
    assert (tmp_path / "node0.json").exists(), errs[0][-3000:]
    report = json.loads((tmp_path / "node0.json").read_text())
    gathered = next(r for r in report["results"] if r["id"] == "run.gather")
    assert gathered["status"] == "pass" and gathered["summary"].startswith("2 of 2"), gathered
    failures = [r for r in report["results"] if r["id"] == "run.failure"]
    # The root cause is rank 1's ValueError on node 1, not rank 0's lost peer on node 0.
    assert failures[0]["rank"] == 1 and failures[0]["node"] == c.hosts[1].hostname, failures
    assert "ValueError: bad batch" in failures[0]["summary"]
    assert report["root_cause"] == "run.failure"
    assert set(report["facts"]["nodes"]) == {"0", "1"}
    # Node 1 keeps its own report and evidence too.
    assert json.loads((tmp_path / "node1.json").read_text())["facts"]["gather"]["sent_to"].endswith(str(gather_port))
    assert not [pid for pid in c.pids()], "processes left in the namespaces"
