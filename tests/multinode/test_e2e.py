"""`ddp-doctor check` on several namespace "hosts" at once: gloo on CPU, the real torchrun c10d rendezvous."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from ddp_doctor.rundir.records import Heartbeat
from tests.multinode.netns import Cluster, Host

pytestmark = [pytest.mark.root, pytest.mark.slow]

TIMEOUT_S = 60
JOIN_S = 20
# Small phases: each node pays for torch imports on this 2-core machine.
LIGHT = ["--dataloader-workers", "1", "--batch-mb", "1"]


def _check_argv(
    out: Path,
    node_rank: int,
    nnodes: int,
    port: int,
    nproc: int,
    rdzv_id: str,
    timeout: float = TIMEOUT_S,
    join: float = JOIN_S,
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ddp_doctor",
        "check",
        "--nnodes",
        str(nnodes),
        "--node-rank",
        str(node_rank),
        "--rdzv-endpoint",
        f"node0:{port}",
        "--rdzv-id",
        rdzv_id,
        "--nproc",
        str(nproc),
        "--backend",
        "gloo",
        "--timeout",
        str(timeout),
        "--join-timeout",
        str(join),
        *LIGHT,
        "--format",
        "json",
        "--output",
        str(out / f"node{node_rank}.json"),
    ]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_SOCKET_IFNAME") and k != "DDP_DOCTOR_FAULT"}
    return {**env, "NO_COLOR": "1", **extra}


def _start(
    c: Cluster,
    hosts: list[Host],
    out: Path,
    nproc: int,
    nnodes: int | None = None,
    envs: dict[int, dict[str, str]] | None = None,
    **kw: Any,
) -> tuple[list[subprocess.Popen[str]], str]:
    port = random.randrange(30000, 40000)
    rdzv_id = f"t{os.getpid()}-{port}"
    # A TMPDIR of this test's own: what the run leaves there is its own, whatever else runs on the machine.
    (out / "tmp").mkdir(exist_ok=True)
    procs = [
        c.popen(
            h,
            _check_argv(out, h.index, nnodes or len(hosts), port, nproc, rdzv_id, **kw),
            env=_env(TMPDIR=str(out / "tmp"), **(envs or {}).get(h.index, {})),
        )
        for h in hosts
    ]
    return procs, rdzv_id


def _wait(procs: list[subprocess.Popen[str]], limit_s: float) -> list[tuple[int, str]]:
    end = time.monotonic() + limit_s
    done = []
    for p in procs:
        try:
            _, err = p.communicate(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
            pytest.fail(f"ddp-doctor check did not finish within {limit_s} s: {err[-2000:]}")
        done.append((p.returncode, err))
    return done


def _report(out: Path, node_rank: int) -> dict[str, Any]:
    return json.loads((out / f"node{node_rank}.json").read_text())


def _failures(out: Path, nodes: int) -> str:
    """The failed results of each node's report, for an assertion message."""
    lines = []
    for n in range(nodes):
        try:
            report = _report(out, n)
        except (OSError, ValueError) as exc:
            lines.append(f"node {n}: no report ({exc})")
            continue
        lines += [
            f"node {n}: {r['id']} rank {r.get('rank')}: {r['summary'][:300]}"
            for r in report["results"]
            if r["status"] in ("fail", "error")
        ]
    return "\n".join(lines) + "\n"


def _by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in report["results"] if r.get("rank") is None}


def _no_orphans(c: Cluster, rdzv_id: str, out: Path) -> None:
    """Nothing left in the namespaces, and no process anywhere that belongs to this rendezvous."""
    time.sleep(0.5)
    assert c.pids() == [], "processes left in the namespaces"
    left = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if rdzv_id in " ".join(p.info["cmdline"] or []) or p.environ().get("TORCHELASTIC_RUN_ID") == rdzv_id:
                left.append(p.pid)
        except psutil.Error:
            continue
    assert left == [], f"processes of the run outlived it: {left}"
    assert not list((out / "tmp").glob("ddp-doctor-cluster-*")), "a cluster temp dir outlived the run"


@pytest.mark.parametrize("nproc", [1, 2])
def test_two_nodes_pass_with_one_cluster_report(
    make_cluster: Callable[[int], Cluster], tmp_path: Path, nproc: int
) -> None:
    c = make_cluster(2)
    # With one rank per node, node 1's clock is also set 3 s ahead (test-only switch): skew is a WARN, not a FAIL.
    skew = {1: {"DDP_DOCTOR_TEST_CLOCK_OFFSET_S": "3"}} if nproc == 1 else {}
    procs, rdzv_id = _start(c, c.hosts, tmp_path, nproc, envs=skew)
    (rc0, err0), (rc1, err1) = _wait(procs, TIMEOUT_S + 30)
    assert (rc0, rc1) == (0, 0), _failures(tmp_path, 2) + err0[-2000:] + err1[-2000:]
    cluster_report, local = _report(tmp_path, 0), _report(tmp_path, 1)
    results = _by_id(cluster_report)
    assert results["multinode.joined"]["summary"] == "2 of 2 nodes joined"
    assert results["multinode.versions"]["status"] == "pass"
    assert results["multinode.rdzv_endpoint"]["observed"]["role"] == "store host"
    bandwidth = results["multinode.bandwidth"]["metrics"]
    assert bandwidth["inter_node1_gbps"] > 0
    assert ("intra_gbps" in bandwidth) == (nproc == 2)
    assert "node 1 (node1): eth0" in results["multinode.interfaces"]["summary"]
    skew_result = results["multinode.clock_skew"]
    if nproc == 1:
        assert skew_result["status"] == "warn", skew_result
        # NTP-style: the error is at most half the best round trip, which a loaded machine stretches.
        assert abs(skew_result["metrics"]["max_clock_skew_s"] - 3.0) < 0.5, skew_result
        assert skew_result["summary"].startswith("node 1 (node1)'s clock is +"), skew_result
    else:
        assert skew_result["status"] == "pass" and skew_result["metrics"]["max_clock_skew_s"] < 0.5
    # Node 0's report holds every rank of the cluster, each with its node.
    rank_nodes = {(r["rank"], r["node"]) for r in cluster_report["results"] if r.get("rank") is not None}
    assert {rank for rank, _ in rank_nodes} == set(range(2 * nproc))
    assert {node for _, node in rank_nodes} == {"node0", "node1"}
    assert cluster_report["facts"]["multinode"]["ranks_gathered"] == list(range(2 * nproc))
    # Node 1 wrote its own local report.
    assert local["facts"]["multinode"]["role"] == "local report"
    assert _by_id(local)["multinode.rdzv_endpoint"]["observed"]["role"] == "client"
    assert "multinode.versions" not in _by_id(local)
    _no_orphans(c, rdzv_id, tmp_path)


def test_node_that_never_starts_is_named_within_the_join_timeout(
    make_cluster: Callable[[int], Cluster], tmp_path: Path
) -> None:
    c = make_cluster(2)
    start = time.monotonic()
    procs, rdzv_id = _start(c, c.hosts[:1], tmp_path, 1, nnodes=2, join=8)
    [(rc, err)] = _wait(procs, TIMEOUT_S)
    elapsed = time.monotonic() - start
    assert rc == 1, err
    assert elapsed < 8 + 15, elapsed
    joined = _by_id(_report(tmp_path, 0))["multinode.joined"]
    assert joined["status"] == "fail"
    assert joined["summary"].startswith("1 of 2 nodes joined within the join timeout (8 s)")
    assert "rendezvous timed out" in joined["cause"]
    _no_orphans(c, rdzv_id, tmp_path)


def test_wrong_gloo_socket_ifname_is_diagnosed_before_launch(
    make_cluster: Callable[[int], Cluster], tmp_path: Path
) -> None:
    c = make_cluster(2)
    start = time.monotonic()
    procs, rdzv_id = _start(c, c.hosts[1:], tmp_path, 1, nnodes=2, envs={1: {"GLOO_SOCKET_IFNAME": "ens5"}})
    [(rc, err)] = _wait(procs, 30)
    assert rc == 1, err
    assert time.monotonic() - start < 15
    report = _report(tmp_path, 1)
    ifname = _by_id(report)["multinode.socket_ifname"]
    assert ifname["status"] == "fail" and ifname["summary"].startswith("GLOO_SOCKET_IFNAME=ens5 matches no interface")
    assert ifname["remedy"].startswith("set GLOO_SOCKET_IFNAME=eth0")
    assert report["facts"]["multinode"]["launched"] is False
    assert not [r for r in report["results"] if r["id"].startswith("live.")], "torchrun must not have started"
    _no_orphans(c, rdzv_id, tmp_path)


def _worker_phase(c: Cluster, host: Host) -> str | None:
    """The phase a rank on `host` is in, read from its heartbeat file in the run directory."""
    for pid in c.pids_of(host):
        try:
            proc = psutil.Process(pid)
            if "ddp_doctor.live.worker" not in " ".join(proc.cmdline()):
                continue
            env = proc.environ()
            beat = Heartbeat.from_json(Path(env["DDP_DOCTOR_RUN_DIR"], f"rank-{env['RANK']}.hb").read_text())
            return beat.phase
        except (psutil.Error, OSError, KeyError, ValueError):
            continue
    return None


def test_link_cut_mid_run_is_named_without_hang_or_orphans(
    make_cluster: Callable[[int], Cluster], tmp_path: Path
) -> None:
    c = make_cluster(2)
    timeout = 30
    procs, rdzv_id = _start(c, c.hosts, tmp_path, 1, timeout=timeout, join=10)
    start = time.monotonic()
    phase = None
    while time.monotonic() - start < timeout:
        phase = _worker_phase(c, c.hosts[1])
        if phase in ("collectives", "dataloader", "sampler", "ddp"):
            break
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.1)
    assert phase in ("collectives", "dataloader", "sampler", "ddp"), f"node 1 never got past init: {phase}"
    c.cut(c.hosts[1])
    (rc0, err0), (rc1, err1) = _wait(procs, timeout + 20)
    assert time.monotonic() - start < timeout + 15
    assert (rc0, rc1) == (1, 1), _failures(tmp_path, 2) + err0[-2000:] + err1[-2000:]
    node0, node1 = _report(tmp_path, 0), _report(tmp_path, 1)
    for report in (node0, node1):
        assert report["root_cause"] == "multinode.link_lost", [
            r["id"] for r in report["results"] if r["status"] == "fail"
        ]
    assert c.hosts[1].address in _by_id(node0)["multinode.link_lost"]["summary"]
    assert "no longer answers from this node" in _by_id(node1)["multinode.link_lost"]["summary"]
    _no_orphans(c, rdzv_id, tmp_path)
