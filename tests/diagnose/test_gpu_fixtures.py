"""Real logs from a one-H200 machine (recorded by gpu/diagnose.sh into tests/fixtures/gpu/diagnose/)."""

from __future__ import annotations

import io
import json
import re

import pytest

from ddp_doctor.diagnose import explain_stream
from ddp_doctor.report import Status
from tests.conftest import FIXTURES

GPU = FIXTURES / "gpu" / "diagnose"
CASES = GPU / "cases.log"
EXPECTED = {
    "duplicate_gpu": "diag.duplicate_gpu",
    "more_ranks_than_gpus": "diag.invalid_device_ordinal",
    "cuda_visible_devices_empty": "diag.no_cuda_gpus",
    "cuda_oom": "diag.cuda_oom",
    "healthy_nccl_info": None,
}
HEADER = re.compile(r"^==> case (?P<name>\S+) exit=(?P<exit>-?\d+) <==$", re.MULTILINE)


def _cases() -> dict[str, tuple[int, str]]:
    text = CASES.read_text(encoding="utf-8", errors="replace")
    marks = list(HEADER.finditer(text))
    return {
        m["name"]: (int(m["exit"]), text[m.end() + 1 : (marks[i + 1].start() if i + 1 < len(marks) else len(text))])
        for i, m in enumerate(marks)
    }


needs_recording = pytest.mark.skipif(
    not CASES.exists(), reason=f"{CASES} not recorded yet: run gpu/diagnose.sh on the H200 machine"
)


@needs_recording
def test_every_case_was_recorded() -> None:
    assert sorted(_cases()) == sorted(EXPECTED)


@needs_recording
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_gpu_case(case: str) -> None:
    code, log = _cases()[case]
    results = explain_stream(io.BytesIO(log.encode()), f"{case}.log", exit_codes={"torchrun": code})
    fails = [r.id for r in results if r.status is Status.FAIL]
    want = EXPECTED[case]
    if want is None:
        assert code == 0, f"the healthy run failed (exit {code}):\n{log[-2000:]}"
        assert fails == [], fails
        return
    assert code != 0
    assert fails and fails[0] == want, f"{[r.id for r in results]}\n{log[-3000:]}"


@needs_recording
def test_explain_on_the_gpu_machine_agreed() -> None:
    rows = [json.loads(line) for line in (GPU / "explain.jsonl").read_text().splitlines() if line.strip()]
    for row in rows:
        assert "error" not in row, row
        assert row["root_cause"] == EXPECTED[row["case"]], row
