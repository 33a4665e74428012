"""A phase that knows why it stops (PhaseError) gives its cause and remedy to the report."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli


def test_nccl_without_cuda_fails_in_init_with_cause_and_remedy() -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine where torch sees no GPU")
    proc = run_cli("check", "--backend", "nccl", "--format", "json", "--timeout", "90", timeout=150)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    failed = [r for r in report["results"] if r["status"] == "fail" and r["id"] == "live.init"]
    assert sorted(r["rank"] for r in failed) == [0, 1]
    for r in failed:
        assert "backend nccl needs CUDA" in r["summary"]
        assert "NVIDIA runtime" in r["cause"] and "--backend gloo" in r["remedy"]
    assert report["root_cause"] == "live.init"
