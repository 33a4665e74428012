"""The static report recorded on a real H200 node by gpu/static.sh, judged and rendered here."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from ddp_doctor.env import checks
from ddp_doctor.render import FORMATS, render
from ddp_doctor.report import Report
from tests.conftest import FIXTURES

REPORT = FIXTURES / "gpu" / "static" / "report.json"
SMI = FIXTURES / "gpu" / "static" / "nvidia-smi.txt"


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    if not REPORT.exists():
        pytest.skip(f"{REPORT} not recorded yet (produced by gpu/static.sh on a GPU node)")
    data: dict[str, Any] = json.loads(REPORT.read_text())
    return data


def test_recorded_facts_are_those_of_a_gpu_node(recorded: dict[str, Any]) -> None:
    facts = recorded["facts"]
    assert facts["gpus"]["driver_loaded"] is True and facts["gpus"]["count"] >= 1
    assert facts["torch"]["flavour"] == "cuda" and facts["torch"]["importable"] is True
    assert facts["torch"]["backends"]["nccl"] is True


def test_rejudged_verdicts(recorded: dict[str, Any]) -> None:
    results = {r.id: r for r in checks.evaluate(recorded["facts"])}
    statuses = {k: r.status.value for k, r in results.items()}
    for id_ in (
        "env.torch.installed",
        "env.torch.import",
        "env.torch.build",
        "env.distributed",
        "env.gpus",
        "env.driver_cuda",
        "env.gpu_arch",
        "env.shm",
    ):
        assert statuses[id_] == "pass", (id_, results[id_].summary)
    assert statuses["env.nccl"] in ("pass", "warn") and recorded["facts"]["nccl"]["version"]
    assert "H200" in results["env.gpus"].summary and "sm_90" in results["env.gpu_arch"].summary
    n_gpus = recorded["facts"]["gpus"]["count"]
    assert statuses["env.gpu_topology"] == ("skip" if n_gpus < 2 else statuses["env.gpu_topology"])
    assert statuses["env.official_build"] == "pass"
    # every check the recording machine ran is judged again here (checks added since come on top)
    assert {r["id"] for r in recorded["results"]} <= set(statuses)


def test_nvml_facts_match_nvidia_smi(recorded: dict[str, Any]) -> None:
    if not SMI.exists():
        pytest.skip("nvidia-smi output not recorded")
    text = SMI.read_text()
    m = re.search(r"Driver Version\s*:\s*(\S+)", text)
    assert m and m.group(1) == recorded["facts"]["gpus"]["driver_version"]
    names = re.findall(r"Product Name\s*:\s*(.+)", text)
    assert len(names) == recorded["facts"]["gpus"]["physical_count"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_recorded_report_renders(recorded: dict[str, Any], fmt: str) -> None:
    out = render(Report.from_dict(recorded), fmt)
    assert "env.gpu_arch" in out
