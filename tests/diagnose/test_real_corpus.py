"""Logs users pasted into public issue threads: explain names the cause each thread confirmed.

tests/fixtures/logs/real/LABELS.yaml holds, per log, its source thread and the conclusion the thread
reached (labels come from the threads, never from explain's output); README.md lists them by class.
"""

from __future__ import annotations

import pytest
import yaml

from ddp_doctor.diagnose import explain_text
from ddp_doctor.report import Status
from tests.conftest import FIXTURES

REAL = FIXTURES / "logs" / "real"
LABELS: dict[str, dict[str, object]] = yaml.safe_load((REAL / "LABELS.yaml").read_text())


def test_every_log_is_labelled_with_its_source() -> None:
    assert sorted(p.name for p in REAL.glob("*.log")) == sorted(LABELS)
    readme = (REAL / "README.md").read_text()
    for name, label in LABELS.items():
        assert str(label["source"]).startswith("https://github.com/"), name
        assert label["confirmed"], name
        assert name in readme and str(label["source"]) in readme, name


@pytest.mark.parametrize("name", sorted(LABELS))
def test_the_thread_s_cause_is_named(name: str) -> None:
    label = LABELS[name]
    results = explain_text((REAL / name).read_bytes(), name)
    failing = [r for r in results if r.status is Status.FAIL]
    want = label["root_cause"]
    if want is None:  # a healthy run: no failure, and no "unknown" warning for its worrying-looking lines
        assert not failing, [r.id for r in results]
        assert "diag.unknown" not in {r.id for r in results}
        return
    assert failing and failing[0].id == want, [(r.id, r.summary[:120]) for r in results]
    root = failing[0]
    if "signal" in label:
        assert root.observed["signal"].startswith(str(label["signal"]))
    if "library" in label:
        assert root.observed["library"] == label["library"]
