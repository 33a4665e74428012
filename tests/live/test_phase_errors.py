"""A phase that knows why it stops (PhaseError) gives its cause and remedy to the report."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli


# Issue 14 item 8: once flaky (3 of 4 runs failed alone). Checked 2026-12-03: 100 consecutive runs
# passed, each a fresh `pytest tests/live/test_phase_errors.py::<this test>` from a snapshot of main
# (nice 19, shared 2-core machine at load average 5 to 7, about 20 s a run).
def test_nccl_without_cuda_fails_in_init_with_cause_and_remedy() -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("needs a machine where torch sees no GPU")
    proc = run_cli("check", "--backend", "nccl", "--format", "json", "--timeout", "90", timeout=150)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    # The truth per rank: a rank that reached the check failed it; torchrun ends the other rank as
    # soon as the first one exits, so that one may never get there (it is then "ended by torchrun",
    # a secondary SKIP, not a failure of its own). Which rank is first is a race; the verdict is not.
    init = {r["rank"]: r for r in report["results"] if r["id"] == "live.init" and r.get("rank") is not None}
    assert sorted(init) == [0, 1], init
    failed = [r for r in init.values() if r["status"] == "fail"]
    assert failed, "at least one rank must fail init with the cause"
    for r in init.values():
        if r["status"] == "fail":
            assert "backend nccl needs CUDA" in r["summary"]
            assert "NVIDIA runtime" in r["cause"] and "--backend gloo" in r["remedy"]
        else:
            assert r["status"] == "skip" and "ended by torchrun" in r["summary"], r
    assert report["root_cause"] == "live.init"
