from __future__ import annotations

import json
import socket
from typing import Any

from ddp_doctor.live.multinode import cluster
from ddp_doctor.report import Status
from ddp_doctor.rundir.cluster import ClusterFile
from ddp_doctor.rundir.records import SCHEMA


def _entry(rank: int, node_rank: int, host: str, **kw: Any) -> dict[str, Any]:
    return {
        "rank": rank,
        "node_rank": node_rank,
        "hostname": host,
        "payload": {"rank": rank},
        "versions": {"torch": "2.13.0+cpu", "cuda": None, "nccl": None, "driver": None},
        "preflight": {"interface": "eth0", "address": f"10.0.0.{10 + node_rank}"},
        **kw,
    }


def _cluster(*entries: dict[str, Any], missing: list[int] | None = None) -> ClusterFile:
    data = {
        "schema": SCHEMA,
        "world_size": len(entries) + len(missing or []),
        "ranks": {str(e["rank"]): e for e in entries},
        "missing": missing or [],
        "gather_timeout_s": 15.0,
    }
    return ClusterFile.from_json(json.dumps(data))


def test_expected_nodes() -> None:
    assert cluster.expected_nodes("2") == (2, 2)
    assert cluster.expected_nodes("1:4") == (1, 4)


def test_all_joined_and_same_versions_pass() -> None:
    c = _cluster(
        _entry(0, 0, "node0", bandwidth_gbps={"intra": 4.0, "inter:1": 1.0}),
        _entry(1, 0, "node0"),
        _entry(2, 1, "node1", clock={"offset_s": 0.002, "rtt_ms": 0.2}),
        _entry(3, 1, "node1"),
    )
    j = cluster.joined("2", c, ["10.0.0.10", "10.0.0.11"], 30, None)
    assert j.status is Status.PASS and j.summary == "2 of 2 nodes joined"
    results = {r.id: r for r in cluster.evaluate(c, "gloo")}
    assert set(results) == {"multinode.versions", "multinode.bandwidth", "multinode.interfaces", "multinode.clock_skew"}
    assert all(r.status is Status.PASS for r in results.values())
    bw = results["multinode.bandwidth"]
    assert bw.metrics == {
        "inter_node1_gbps": 1.0,
        "inter_min_gbps": 1.0,
        "intra_gbps": 4.0,
        "inter_to_intra_ratio": 0.25,
    }
    assert "node 1 (node1): eth0 10.0.0.11 TCP (gloo)" in results["multinode.interfaces"].summary


def test_version_mismatch_names_the_nodes() -> None:
    odd = _entry(1, 1, "node1")
    odd["versions"] = {**odd["versions"], "torch": "2.12.1+cpu"}
    r = cluster.versions(_cluster(_entry(0, 0, "node0"), odd))
    assert r.status is Status.FAIL
    assert r.summary == "versions differ between nodes: torch: node 0 (node0) 2.13.0+cpu, node 1 (node1) 2.12.1+cpu"


def test_clock_skew_warns_beyond_a_second() -> None:
    c = _cluster(_entry(0, 0, "node0"), _entry(1, 1, "node1", clock={"offset_s": -2.5, "rtt_ms": 0.3}))
    r = cluster.clock_skew(c)
    assert r is not None and r.status is Status.WARN
    assert r.summary.startswith("node 1 (node1)'s clock is -2.500 s from node 0's")
    assert "chrony" in (r.remedy or "")


def test_slow_link_warns() -> None:
    c = _cluster(
        _entry(0, 0, "n0", bandwidth_gbps={"inter:1": 2.0, "inter:2": 2.1, "inter:3": 0.4}),
        _entry(1, 1, "n1"),
        _entry(2, 2, "n2"),
        _entry(3, 3, "n3"),
    )
    r = cluster.bandwidth(c, "gloo")
    assert r is not None and r.status is Status.WARN and r.observed["slow_nodes"] == ["3"]


def test_one_of_two_joined_and_missing_ranks_fail() -> None:
    j = cluster.joined("2", None, ["10.0.0.10"], 8, "RendezvousTimeoutError")
    assert j.status is Status.FAIL
    assert j.summary.startswith("1 of 2 nodes joined within the join timeout (8 s)")
    m = cluster.missing_ranks(_cluster(_entry(0, 0, "node0"), missing=[1]))
    assert m is not None and m.status is Status.FAIL and "silent: rank 1" in m.summary


def test_store_peers_sees_a_real_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):
            conn, _ = server.accept()
            with conn:
                assert cluster.store_peers(port) == {"127.0.0.1"}
    assert cluster.reachable("127.0.0.1", port)  # refused is reachable: the path works


def test_interfaces_name_nccl_transports_per_node() -> None:
    a = _entry(0, 0, "gpu-a", nccl={"transports": {"P2P": 8, "NET/IB": 4}, "socket_interfaces": None})
    b = _entry(1, 1, "gpu-b", nccl={"transports": {"NET/Socket": 4}, "socket_interfaces": "eth0:10.0.0.11<0>"})
    b["preflight"] = {}
    r = cluster.interfaces(_cluster(a, b), "nccl")
    assert r.observed["per_node"]["node 0 (gpu-a)"]["transport"] == "NET/IB, P2P"
    assert r.observed["per_node"]["node 1 (gpu-b)"] == {
        "interface": "eth0:10.0.0.11<0>",
        "address": None,
        "transport": "NET/Socket",
    }


def test_the_peer_a_rank_lost_is_read_from_gloo_and_nccl_errors() -> None:
    lines = [
        "RuntimeError: [../gloo/transport/tcp/pair.cc:537] Read error [10.0.0.11]:18621: Connection reset by peer.",
        "RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer [10.0.0.12]:63141",
        "NCCL WARN socketProgress: Connection closed by remote peer 10.0.0.11<43125>",
        "RuntimeError: rank 2 raised: address 10.0.0.99:80 is fine",  # no lost peer in it
    ]
    assert cluster.peers_in_errors(lines) == ["10.0.0.11", "10.0.0.12"]


def test_a_lost_peer_is_named_by_its_host_name() -> None:
    assert cluster.node_words("127.0.0.1") == "localhost (127.0.0.1)"
    result = cluster.peer_failed(["127.0.0.1"], "collectives")
    assert result.status is Status.FAIL and result.id == "multinode.peer_failed"
    assert result.summary == (
        "this node's ranks lost their connection to localhost (127.0.0.1) in collectives: a rank there ended first"
    )
