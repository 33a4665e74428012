"""A log that stops at a framework's own process-group set-up lines is a possible hang (WARN), never healthy.

The lines are written as DeepSpeed's init_distributed (deepspeed/comm/comm.py) and Megatron-LM's
_initialize_distributed (megatron/training/initialize.py) print them; readers.yaml names the sources.
"""

from __future__ import annotations

import pytest

from ddp_doctor.diagnose import explain_text
from ddp_doctor.report import Result, Status

DEEPSPEED = [
    "[2024-01-02 03:04:05,100] [INFO] [comm.py:637:init_distributed] cdb=None",
    "[2024-01-02 03:04:05,101] [INFO] [comm.py:668:init_distributed] Initializing TorchBackend in DeepSpeed with backend nccl",
    "[2024-01-02 03:04:05,140] [INFO] [comm.py:637:init_distributed] cdb=None",
]
MEGATRON = [
    "using world size: 8, data-parallel size: 8, tensor-model-parallel size: 1",
    "> initializing torch distributed ...",
]
AFTER = [
    "> initialized tensor model parallel with size 1",
    "step 10 loss 2.31",
    "step 20 loss 2.02",
]


def _results(lines: list[str]) -> list[Result]:
    return explain_text(("\n".join(lines) + "\n").encode(), "log")


@pytest.mark.parametrize("lines", [DEEPSPEED, MEGATRON], ids=["deepspeed", "megatron"])
def test_a_log_that_stops_at_a_framework_s_init_is_a_possible_hang(lines: list[str]) -> None:
    results = _results(lines)
    hang = [r for r in results if r.id == "diag.hang"]
    assert hang and hang[0].status is Status.WARN, [(r.id, r.status) for r in results]
    assert hang[0].observed["stage"] == "init"
    assert not any(r.status is Status.FAIL for r in results)


@pytest.mark.parametrize("lines", [DEEPSPEED, MEGATRON], ids=["deepspeed", "megatron"])
def test_a_run_that_went_on_after_init_is_healthy(lines: list[str]) -> None:
    results = _results(lines + AFTER)
    assert not any(r.status in (Status.FAIL, Status.WARN) for r in results), [(r.id, r.summary) for r in results]
