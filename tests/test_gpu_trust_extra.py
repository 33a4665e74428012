"""Re-judge the recordings of gpu/trust_extra.sh (one H200, torch 2.11+cu130, NCCL 2.28): a bogus
NCCL_SOCKET_IFNAME is named and its remedy names only usable interfaces; NCCL_NET naming no network
is a static WARN (never a FAIL) that says where NCCL looks for plugins, and the live failure names it.

Until the coordinator has run gpu/trust_extra.sh and committed tests/fixtures/gpu/trust_extra/, every
test here skips saying so (a skip is not a pass)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.env import checks

EXTRA = Path(__file__).resolve().parent / "fixtures" / "gpu" / "trust_extra"


def load(name: str) -> dict[str, Any]:
    path = EXTRA / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"fixture {path.relative_to(EXTRA.parents[2])} missing: run gpu/trust_extra.sh on the GPU node")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def results(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in report["results"] if r.get("rank") is None}


def test_bogus_ifname_is_named_and_the_remedy_names_only_usable_interfaces() -> None:
    report = load("ifname-bogus")
    r = results(report)["env.env_vars"]
    assert r["status"] == "fail" and "NCCL_SOCKET_IFNAME=nonexist0" in r["summary"]
    interfaces = {i["name"]: i for i in report["facts"]["network"]["interfaces"]}
    m = re.search(
        r"set NCCL_SOCKET_IFNAME=(\S+) \(.*?\)(?:; also usable: ([^,]+(?:, [^,]+)*?))?, or unset", r["remedy"]
    )
    assert m, r["remedy"]
    named = [m.group(1), *(m.group(2).split(", ") if m.group(2) else [])]
    for name in named:
        assert interfaces[name]["state"] == "up" and interfaces[name]["addresses"], (name, interfaces[name])
    down = [n for n, i in interfaces.items() if i["state"] == "down"]
    assert not [n for n in down if re.search(rf"\b{re.escape(n)}\b", r["remedy"])], (down, r["remedy"])
    # Whatever the live chain did, a live failure names the variable as its root cause.
    failed_live = [x for x in report["results"] if x["id"].startswith("live.") and x["status"] == "fail"]
    for x in failed_live:
        assert "NCCL_SOCKET_IFNAME" in (x.get("cause") or "") + x["summary"], x


def test_static_nccl_net_warns_or_passes_as_the_plugin_files_say_never_fails() -> None:
    report = load("net-bogus-static")
    r = results(report)["env.dist_vars"]
    plugins = report["facts"]["nccl"]["net_plugins"]
    if plugins["found"]:
        assert r["status"] == "pass", (r, plugins)
    else:
        assert r["status"] == "warn" and "NCCL_NET=Bogus" in r["summary"] and "IB or Socket" in r["summary"]
        assert all(s.split(" (")[0] in r["summary"] for s in plugins["searched"] if "ldconfig" not in s)
    again = {x.id: x for x in checks.evaluate(report["facts"])}["env.dist_vars"]
    assert again.status.value == r["status"]


def test_full_check_nccl_net_names_the_variable_as_the_live_root_cause() -> None:
    report = load("net-bogus")
    r = results(report)
    # live results are per rank (rank 0 here, the only one): read it with its rank, and as the report's root cause.
    (init,) = [x for x in report["results"] if x["id"] == "live.init"]
    assert init["status"] == "fail" and init["rank"] == 0, init
    assert "NCCL_NET" in (init.get("cause") or ""), init
    assert report["root_cause"] and report["root_cause"].startswith("live.init"), report["root_cause"]
    assert r["env.dist_vars"]["status"] in ("warn", "pass")
