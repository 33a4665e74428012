"""docs/diagnosis.md is generated from the catalogue; the committed page must be the generated one."""

from __future__ import annotations

import subprocess
import sys

from ddp_doctor.diagnose import catalogue
from ddp_doctor.diagnose.docs import PAGE, render


def test_committed_page_equals_generated() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), "run: python -m ddp_doctor.diagnose.docs"


def test_every_signature_is_on_the_page_with_cause_and_remedy() -> None:
    page = render()
    for sig in catalogue.load():
        assert f'<a id="{sig.id}"></a>' in page
        assert sig.cause in page and sig.remedy in page


def test_check_mode_detects_a_stale_page(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stale = tmp_path / "diagnosis.md"
    stale.write_text("old\n")
    cmd = [sys.executable, "-m", "ddp_doctor.diagnose.docs", "--check", "--output", str(stale)]
    assert subprocess.run(cmd, capture_output=True, check=False).returncode == 1
    stale.write_text(render())
    assert subprocess.run(cmd, capture_output=True, check=False).returncode == 0
