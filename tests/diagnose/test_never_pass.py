"""Never a PASS for a failure, never a FAIL for a healthy run: every log of every corpus.

The failure logs are the fixtures under tests/fixtures/logs with a root cause in EXPECTED.yaml and every log of
the real corpus labelled `fail`, both parts: the blind part is run, never read, so a class of failure explain
would call healthy shows here as soon as a log of it is collected. The rule is stated in docs/diagnosis.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ddp_doctor.diagnose import explain_text
from ddp_doctor.report import Status
from tests.conftest import FIXTURES
from tests.fixtures.logs.real import corpus

LOGS = FIXTURES / "logs"
EXPECTED = yaml.safe_load((LOGS / "EXPECTED.yaml").read_text())
LABELS = corpus.load()
CASES = sorted(
    [(LOGS / name, want["root_cause"] is not None) for name, want in EXPECTED.items()]
    + [(corpus.HERE / name, label["verdict"] == "fail") for name, label in LABELS.items()],
    key=lambda c: c[0].name,
)

CONTRADICTED = {
    # Byte for byte the one line of jobset-93.log, which its thread calls healthy (the retry then worked): the
    # same input cannot be both. explain says WARN (diag.master_retry: harmless once, a FAIL when repeated).
    "jobset-603.log": "the same bytes as jobset-93.log, labelled healthy",
    # Blind failures explain still calls healthy: never read here; benchmarks/score_explain_corpus.py lists them
    # as misses, and the class each names is the next thing to learn (strict: a fix shows here).
    "nanoflow-22.log": "blind: a failure called healthy, its class not known yet",
    "ray-30333.log": "blind: a failure called healthy, its class not known yet",
    "nccl-tests-115.log": "blind: a failure called healthy, its class not known yet",
    "ml-engineering-1.log": "blind: a failure called healthy, its class not known yet",
    "rccl-1129.log": "blind: a failure called healthy, its class not known yet",
    # Fitted, collected last: hangs whose log ends in ordinary startup lines, and one launcher warning line.
    "accelerate-663.log": "fitted: accelerate making deepspeed ignore CUDA_VISIBLE_DEVICES, not read as a failure yet",
    "nvdiffrec-39.log": "fitted: a stale extension build lock (a hang) is not read as a failure yet",
    "openrlhf-208.log": "fitted: a stale extension build lock (a hang) is not read as a failure yet",
    "particleflow-390.log": "fitted: watchdog frames without their first line are not read as a failure yet",
    "horovod-110.log": "fitted: an ssh password prompt stalling mpirun is not read as a failure yet",
    "mmcv-93.log": "fitted: one source line raising SyncBatchNorm's AttributeError is not read as a failure yet",
}


@pytest.mark.parametrize(("path", "failed"), CASES, ids=[f"{c[0].parent.name}/{c[0].name}" for c in CASES])
def test_a_failure_is_a_fail_and_a_healthy_run_is_not(path: Path, failed: bool) -> None:
    # The name given is neutral: a file name can carry the answer.
    statuses = [r.status for r in explain_text(path.read_bytes(), "log")]
    if path.name in CONTRADICTED:
        assert (Status.FAIL in statuses) != failed, "fixed: take it off CONTRADICTED"
        pytest.xfail(CONTRADICTED[path.name])
    if failed:
        assert Status.FAIL in statuses, (path.name, statuses)
    else:
        assert Status.FAIL not in statuses, (path.name, statuses)
