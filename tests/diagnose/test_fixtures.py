"""Recorded and hand-written logs under tests/fixtures/logs: root cause, cascade, attribution."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from ddp_doctor.diagnose import explain_stream
from ddp_doctor.report import Status
from tests.conftest import FIXTURES

LOGS = FIXTURES / "logs"
EXPECTED = yaml.safe_load((LOGS / "EXPECTED.yaml").read_text())


def test_every_fixture_has_an_expectation() -> None:
    assert sorted(p.name for p in LOGS.glob("*.log")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture(name: str) -> None:
    want = EXPECTED[name]
    with (LOGS / name).open("rb") as f:
        results = explain_stream(f, name)
    ids = [r.id for r in results]
    failures = [r for r in results if r.status is Status.FAIL]
    if want["root_cause"] is None:
        assert not failures, ids
        return
    assert ids[0] == want["root_cause"], ids
    for later in want.get("also", []):
        assert later in ids[1:], (later, ids)
    root = results[0]
    assert root.evidence and all(e.line is not None and e.line > 0 for e in root.evidence)
    text = Path(LOGS / name).read_text(errors="replace").splitlines()
    for e in root.evidence:  # evidence points at the real line
        assert " ".join(text[e.line - 1].split())[:60] in " ".join(e.text.split()) or e.text[:40] in text[e.line - 1]
    if "ranks" in want:
        assert root.observed["ranks"] == want["ranks"]
    if "node" in want:
        assert root.node == want["node"]


def test_nccl_last_error_is_shown() -> None:
    with (LOGS / "gpu-nccl-shm-last-error.log").open("rb") as f:
        results = {r.id: r for r in explain_stream(f, "x")}
    nccl = results["diag.nccl_system_error"]
    assert "Error while creating shared memory segment" in nccl.summary
    assert any(e.line == 28 for e in nccl.evidence)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_line_list_and_stream_paths_agree(name: str) -> None:
    from ddp_doctor.diagnose import diagnose

    data = (LOGS / name).read_bytes()
    streamed = explain_stream(io.BytesIO(data), name)
    listed = diagnose({name: data.decode("utf-8", "replace").split("\n")}, unknown=True, harmless=True)
    # a hang is read from a stream's tail only (it needs the log's end, which a list of lines may not be)
    assert [(r.id, [e.line for e in r.evidence]) for r in listed] == [
        (r.id, [e.line for e in r.evidence]) for r in streamed if r.id != "diag.hang"
    ]
