from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from ddp_doctor.errors import UsageError
from ddp_doctor.live.multinode.preflight import Endpoint, match_ifname, parse_endpoint
from tests.multinode.netns import Cluster, Host

PORT = 29511
_RUN = (
    "import json,sys\n"
    "from ddp_doctor.live.multinode.preflight import preflight\n"
    "a=json.loads(sys.argv[1])\n"
    "print(json.dumps([r.to_dict() for r in preflight(a['ep'], a['rank'], a['backend'], a['env'], a['wait'])]))\n"
)


def _preflight(
    cluster: Cluster,
    host: Host,
    endpoint: str,
    rank: int | None,
    env: dict[str, str] | None = None,
    wait: float = 3.0,
    backend: str = "gloo",
) -> dict[str, dict[str, Any]]:
    args = json.dumps({"ep": endpoint, "rank": rank, "backend": backend, "env": env or {}, "wait": wait})
    proc = cluster.run(host, [sys.executable, "-c", _RUN, args], timeout=wait + 20)
    assert proc.returncode == 0, proc.stderr
    return {r["id"]: r for r in json.loads(proc.stdout)}


def test_parse_endpoint() -> None:
    assert parse_endpoint("node0:29500") == Endpoint("node0", 29500)
    assert parse_endpoint("10.0.0.1") == Endpoint("10.0.0.1", 29400)
    assert parse_endpoint("[fd00::1]:1234") == Endpoint("fd00::1", 1234)
    assert str(Endpoint("fd00::1", 1234)) == "[fd00::1]:1234"
    for bad in ("node0:http", ":29500", "node0:0", "node0:70000"):
        with pytest.raises(UsageError):
            parse_endpoint(bad)


def test_ifname_matching_follows_nccl_and_gloo_rules() -> None:
    names = ["lo", "eth0", "eth1", "docker0", "ib0"]
    assert match_ifname("eth", names, "NCCL_SOCKET_IFNAME") == ["eth0", "eth1"]
    assert match_ifname("=eth", names, "NCCL_SOCKET_IFNAME") == []
    assert match_ifname("^lo,docker", names, "NCCL_SOCKET_IFNAME") == ["eth0", "eth1", "ib0"]
    assert match_ifname("eth", names, "GLOO_SOCKET_IFNAME") == []
    assert match_ifname("eth1,ib0", names, "GLOO_SOCKET_IFNAME") == ["eth1", "ib0"]


@pytest.mark.root
def test_good_setup_passes_on_both_nodes(make_cluster: Callable[[int], Cluster]) -> None:
    c = make_cluster(2)
    h0, h1 = c.hosts
    ep = f"{h0.address}:{PORT}"
    r0 = _preflight(c, h0, ep, 0)
    assert r0["multinode.rdzv_endpoint"]["status"] == "pass", r0
    assert r0["multinode.socket_ifname"]["status"] == "pass"
    assert r0["multinode.socket_ifname"]["observed"]["address"] == h0.address  # hostname node0 -> eth0
    listener = c.popen(
        h0, [sys.executable, "-c", f"import socket,time;s=socket.create_server(({h0.address!r},{PORT}));time.sleep(30)"]
    )
    try:
        r1 = _preflight(c, h1, ep, 1, env={"GLOO_SOCKET_IFNAME": "eth0"}, wait=10)
    finally:
        listener.kill()
        listener.wait(5)
    assert r1["multinode.rdzv_endpoint"]["status"] == "pass", r1["multinode.rdzv_endpoint"]
    assert r1["multinode.socket_ifname"]["observed"]["interface"] == "eth0"
    assert r1["multinode.socket_ifname"]["observed"]["route_interface"] == "eth0"


@pytest.mark.root
def test_unreachable_endpoint_fails_fast_with_remedy(make_cluster: Callable[[int], Cluster]) -> None:
    c = make_cluster(2)
    h0, h1 = c.hosts
    # Nothing listens on node 0: refused, retried until the short wait, then a clear FAIL.
    start = time.monotonic()
    r = _preflight(c, h1, f"{h0.address}:{PORT}", 1, wait=2)["multinode.rdzv_endpoint"]
    assert time.monotonic() - start < 15
    assert r["status"] == "fail"
    assert r["summary"].startswith(f"cannot reach {h0.address}:{PORT} from this node: connection refused")
    assert f"nc -zv {h0.address} {PORT}" in r["remedy"]
    # Cable of node 0 pulled: dropped packets, still bounded.
    c.cut(h0)
    start = time.monotonic()
    r = _preflight(c, h1, f"node0:{PORT}", 1, wait=2)["multinode.rdzv_endpoint"]
    assert time.monotonic() - start < 15
    assert r["status"] == "fail" and "cannot reach node0:" in r["summary"], r
    # A name nobody knows.
    r = _preflight(c, h1, f"node7:{PORT}", 1, wait=2)["multinode.rdzv_endpoint"]
    assert r["status"] == "fail" and r["summary"].startswith("cannot resolve node7"), r


@pytest.mark.root
def test_node0_must_host_the_store(make_cluster: Callable[[int], Cluster]) -> None:
    c = make_cluster(2)
    h0, h1 = c.hosts
    r = _preflight(c, h1, f"{h0.address}:{PORT}", 0)["multinode.rdzv_endpoint"]
    assert r["status"] == "fail" and "is not an address of this node" in r["summary"], r
    holder = c.popen(
        h0, [sys.executable, "-c", f"import socket,time;s=socket.create_server(({h0.address!r},{PORT}));time.sleep(30)"]
    )
    try:
        time.sleep(0.5)
        r = _preflight(c, h0, f"{h0.address}:{PORT}", 0)["multinode.rdzv_endpoint"]
    finally:
        holder.kill()
        holder.wait(5)
    assert r["status"] == "fail" and "already in use" in r["summary"], r


@pytest.mark.root
def test_wrong_gloo_socket_ifname_is_diagnosed(make_cluster: Callable[[int], Cluster]) -> None:
    c = make_cluster(1)
    h0 = c.hosts[0]
    r = _preflight(c, h0, f"{h0.address}:{PORT}", 0, env={"GLOO_SOCKET_IFNAME": "ens5"})["multinode.socket_ifname"]
    assert r["status"] == "fail"
    assert r["summary"].startswith("GLOO_SOCKET_IFNAME=ens5 matches no interface; this node has")
    assert "eth0" in r["summary"] and r["remedy"].startswith("set GLOO_SOCKET_IFNAME=eth0")
    r = _preflight(c, h0, f"{h0.address}:{PORT}", 0, env={"GLOO_SOCKET_IFNAME": "lo"})["multinode.socket_ifname"]
    # Even on node 0 itself: the other nodes must connect to this node's gloo, never over a loopback.
    assert r["status"] == "fail" and "selects only the loopback" in r["summary"], r
    assert r["remedy"] == "set GLOO_SOCKET_IFNAME=eth0"
