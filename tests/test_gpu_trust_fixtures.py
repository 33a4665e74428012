"""Re-judge the recordings of gpu/trust.sh (one H200, torch 2.11+cu130, NCCL 2.28): the doctor in its
own venv and in the node's python both pass with NCCL; hidden GPUs FAIL; a busy GPU is named;
bogus NCCL settings are named; bench with one rank prints no bandwidth.

Until the coordinator has run gpu/trust.sh and committed tests/fixtures/gpu/trust/, every test here
skips saying so (a skip is not a pass)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.env import checks
from ddp_doctor.live.reconcile import reconcile
from ddp_doctor.report import Report, Status

TRUST = Path(__file__).resolve().parent / "fixtures" / "gpu" / "trust"


def load(name: str) -> dict[str, Any]:
    path = TRUST / f"{name}.json"
    if not path.is_file():
        pytest.skip(f"fixture {path.relative_to(TRUST.parents[2])} missing: run gpu/trust.sh on the GPU node")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def results(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in report["results"] if r.get("rank") is None}


def log() -> str:
    path = TRUST / "log.txt"
    if not path.is_file():
        pytest.skip("fixture tests/fixtures/gpu/trust/log.txt missing: run gpu/trust.sh on the GPU node")
    return path.read_text()


@pytest.mark.parametrize("name", ["venv-check", "system-check"])
def test_full_check_passes_with_nccl(name: str) -> None:
    report = load(name)
    r = results(report)
    assert report["verdict"] in ("pass", "warn"), [
        (x["id"], x["summary"]) for x in report["results"] if x["status"] == "fail"
    ]
    assert report["facts"]["live"]["backend"] == "nccl"
    assert r["env.nccl"]["status"] != "fail" and r["env.torch.installed"]["status"] == "pass"
    assert r["live.ddp.param_sync"]["status"] == "pass"
    assert r["env.gpus.expected"]["status"] == "pass"
    # judged again from the recorded facts, with the live results, the verdict holds
    again = reconcile([*checks.evaluate(report["facts"]), *Report.from_dict(report).results])
    assert not [x for x in again if x.id.startswith("env.") and x.status is Status.FAIL]


def test_the_pipx_style_venv_examined_the_nodes_python() -> None:
    report = load("venv-check")
    target = report["facts"]["target"]
    assert target["source"] == "torchrun" and target["own"] is False
    assert "torchrun on PATH" in report["target"]["python"]
    assert "doctor venv has torch: no" in log()


def test_hidden_gpus_fail() -> None:
    report = load("cvd-bogus")
    r = results(report)
    assert report["verdict"] == "fail"
    assert r["env.gpus.expected"]["status"] == "fail"
    assert "CUDA_VISIBLE_DEVICES='GPU-00000000" in r["env.gpus.expected"]["summary"]
    assert "NVML sees 1" in r["env.gpus.expected"]["summary"]


def test_busy_gpu_is_named_and_its_load_not_claimed() -> None:
    report = load("busy")
    m = re.search(r"^busy pid (\d+)$", log(), re.MULTILINE)
    assert m, "log.txt records the busy process's pid"
    r = results(report)
    assert r["env.gpus.busy"]["status"] == "warn"
    named = re.search(r"pid (\d+) \(python3\) holds (\d+\.\d) GiB", r["env.gpus.busy"]["summary"])
    assert named, r["env.gpus.busy"]["summary"]
    assert named.group(1) == m.group(1) and float(named.group(2)) >= 100
    util = r.get("live.balance.gpu_util")
    if util is not None:  # absent only when the ranks' python has no nvidia-ml-py
        assert util["status"] == "warn" and "other processes shared the GPUs" in util["summary"]


@pytest.mark.parametrize(("name", "variable"), [("algo-bogus", "NCCL_ALGO"), ("net-bogus", "NCCL_NET")])
def test_bogus_nccl_settings_are_named(name: str, variable: str) -> None:
    report = load(name)
    assert report["verdict"] == "fail"
    named = [
        x
        for x in report["results"]
        if x["status"] == "fail"
        and (variable in x["summary"] or f"{variable}=Bogus is the root cause" in (x.get("cause") or ""))
    ]
    assert named, [(x["id"], x["summary"], x.get("cause")) for x in report["results"] if x["status"] == "fail"]


def test_bench_with_one_rank_prints_no_bandwidth() -> None:
    report = load("bench-1rank")
    ops = [x for x in report["results"] if x["id"].startswith("bench.all_reduce")]
    assert ops and all(x["status"] == "skip" and "nothing moves between devices" in x["summary"] for x in ops)
    assert all("GB/s" not in x["summary"] for x in ops)


def test_bogus_nccl_net_failure_rejudged_names_the_variable() -> None:
    """The H200 recording of NCCL_NET=Bogus (made before the rule knew NCCL 2.28's words), judged again
    by today's rule over the recorded live result, env and interfaces."""
    from ddp_doctor.live.reconcile import blame_variables

    report = load("net-bogus")
    facts = report["facts"]
    names = [i["name"] for i in facts["network"]["interfaces"]]
    recorded = [x for x in Report.from_dict(report).results if x.id == "live.init" and x.status is Status.FAIL]
    assert recorded and "invalid usage" in recorded[0].summary
    (again,) = blame_variables(recorded[:1], facts["env"], names)
    assert again.observed["root_cause_variable"] == "NCCL_NET"
    assert again.cause is not None and again.cause.startswith("NCCL_NET=Bogus is the root cause")
