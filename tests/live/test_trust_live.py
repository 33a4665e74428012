"""The full check on this CPU machine: a quiet gloo pass never hides that GPUs were expected, and a
live failure caused by a setting names the variable."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

pytest.importorskip("torch")


def _check(*args: str, env: dict[str, str]) -> tuple[int, dict[str, object]]:
    proc = run_cli("check", "--format", "json", "--timeout", "120", *args, env=env, timeout=200)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_gpus_expected_but_absent_fails_although_the_gloo_chain_passes() -> None:
    code, report = _check(env={"NVIDIA_VISIBLE_DEVICES": "all"})
    results = {r["id"]: r for r in report["results"] if r.get("rank") is None}  # type: ignore[union-attr]
    assert code == 1 and report["verdict"] == "fail"
    assert results["env.gpus.expected"]["status"] == "fail"
    assert results["live.ddp.param_sync"]["status"] == "pass"  # the rest was still checked, on gloo
    assert report["facts"]["live"]["backend"] == "gloo"  # type: ignore[index]


def test_live_failure_from_gloo_socket_ifname_names_the_variable() -> None:
    code, report = _check(env={"GLOO_SOCKET_IFNAME": "nonexist0"})
    assert code == 1
    live_fails = [r for r in report["results"] if r["status"] == "fail" and r["id"].startswith("live.")]  # type: ignore[union-attr]
    assert live_fails, report["results"]
    assert any("GLOO_SOCKET_IFNAME=nonexist0 is the root cause" in (r.get("cause") or "") for r in live_fails), [
        (r["id"], r.get("cause")) for r in live_fails
    ]
