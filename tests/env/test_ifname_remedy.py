"""*_SOCKET_IFNAME remedies name only interfaces that are UP with an address of the right family,
the one carrying the route to MASTER_ADDR (or the default route) first: in a real network
namespace holding DOWN interfaces and interfaces without an address."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from ddp_doctor.checks.facts.host import EnvVarsFacts
from ddp_doctor.checks.interfaces import ifname_remedy
from tests.conftest import ROOT
from tests.env.factsbuilder import make_facts

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2 for a network namespace"
)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"i14if{os.getpid()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10, check=False)
    _ip("netns", "add", name)
    try:

        def inside(*args: str) -> None:
            _ip("-n", name, *args)

        inside("link", "set", "lo", "up")
        # veth pairs (this kernel has no dummy driver); the peer ends are UP without an address.
        for dev in ("ifb0", "dumdown", "dumv6", "dumA", "dumB"):
            inside("link", "add", dev, "type", "veth", "peer", "name", f"{dev}p")
        inside("addr", "add", "10.78.0.1/24", "dev", "dumdown")  # an address, but DOWN
        # ifb0 stays DOWN without an address: the remedy the issue saw
        for dev, addr in (("dumA", "10.77.0.1/24"), ("dumB", "10.88.0.1/24"), ("dumv6", "fd00:14::1/64")):
            inside("addr", "add", addr, "dev", dev, *(["nodad"] if ":" in addr else []))
            inside("link", "set", f"{dev}p", "up")
            inside("link", "set", dev, "up")
        inside("route", "add", "default", "dev", "dumA")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=10, check=False)


def _static_in(ns: str, env: dict[str, str]) -> dict[str, Any]:
    full = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(ROOT / "src"), **env}
    full.pop("MASTER_ADDR", None) if "MASTER_ADDR" not in env else None
    proc = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "ddp_doctor", "check", "--static", "--format", "json"],
        capture_output=True,
        text=True,
        env=full,
        timeout=180,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return {r["id"]: r for r in json.loads(proc.stdout)["results"]}


def test_remedy_names_the_up_interface_of_the_default_route(netns: str) -> None:
    r = _static_in(netns, {"NCCL_SOCKET_IFNAME": "nonexist0"})["env.env_vars"]
    assert r["status"] == "fail" and "nonexist0" in r["summary"]
    remedy = r["remedy"]
    assert "NCCL_SOCKET_IFNAME=dumA" in remedy and "default route" in remedy
    for unusable in ("ifb0", "dumdown", "dumv6", "dumAp"):
        assert unusable not in remedy, remedy
    assert "dumB" in remedy  # usable too, ranked after the route's interface


def test_remedy_prefers_the_route_to_master_addr(netns: str) -> None:
    r = _static_in(netns, {"GLOO_SOCKET_IFNAME": "nonexist0", "MASTER_ADDR": "10.88.0.5"})["env.env_vars"]
    assert "GLOO_SOCKET_IFNAME=dumB" in r["remedy"] and "route to 10.88.0.5" in r["remedy"]
    assert "ifb0" not in r["remedy"] and "dumdown" not in r["remedy"]


def test_ipv6_family_picks_the_ipv6_interface() -> None:
    ifaces = [
        {"name": "eth0", "state": "up", "loopback": False, "addresses": ["192.0.2.2"]},
        {"name": "ib0", "state": "up", "loopback": False, "addresses": ["fd00::2"]},
        {"name": "ifb0", "state": "down", "loopback": False, "addresses": []},
    ]
    facts = make_facts(
        network={"interfaces": ifaces, "route": {"interface": "eth0", "how": "default route"}},
        env={"NCCL_SOCKET_FAMILY": "AF_INET6"},
    )
    f = EnvVarsFacts.from_env(facts)
    remedy = ifname_remedy("NCCL_SOCKET_IFNAME", f.env, f.context.network)
    assert remedy.startswith("set NCCL_SOCKET_IFNAME=ib0") and "eth0" not in remedy and "ifb0" not in remedy
    nothing = make_facts(network={"interfaces": ifaces[2:], "route": {}})
    g = EnvVarsFacts.from_env(nothing)
    assert ifname_remedy("GLOO_SOCKET_IFNAME", g.env, g.context.network).startswith("unset GLOO_SOCKET_IFNAME")
