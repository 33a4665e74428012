"""`ddp-doctor image /` recorded on a GPU node (gpu/image.sh): the static reading of a real CUDA
torch install must agree with what the imported torch says about itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "gpu" / "image"


def _load() -> tuple[dict, dict[str, str]]:  # type: ignore[type-arg]
    report, truth = FIXTURE / "host_root.json", FIXTURE / "torch_truth.txt"
    if not (report.is_file() and truth.is_file()):
        pytest.skip("tests/fixtures/gpu/image/ not recorded yet (the lead runs gpu/image.sh on a GPU node)")
    facts = dict(line.split("=", 1) for line in truth.read_text().splitlines() if "=" in line)
    return json.loads(report.read_text()), facts


def test_static_reading_matches_the_imported_torch() -> None:
    report, truth = _load()
    torch, nccl = report["facts"]["torch"], report["facts"]["nccl"]
    assert torch["version"] == truth["version"] and torch["cuda"] == truth["cuda"]
    assert torch["flavour"] == "cuda"
    assert truth["location"].startswith(torch["location"])
    by_id = {r["id"]: r for r in report["results"]}
    assert by_id["image.torch"]["status"] == "pass"
    assert by_id["image.nccl"]["status"] in ("pass", "warn") and nccl["library"]
    if truth["nccl"] != "None":
        assert nccl["version"] == truth["nccl"], nccl


def test_torchrun_found_like_the_shell_finds_it() -> None:
    report, truth = _load()
    if truth["torchrun"] == "None":
        pytest.skip("no torchrun on that node's PATH")
    tr = report["facts"]["torchrun"]
    assert tr["path"] is not None and Path(truth["torchrun"]).name == "torchrun"
