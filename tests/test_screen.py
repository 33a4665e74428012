"""The default `ddp-doctor check` on this machine, read as a person reads it: one screen, the verdict first."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli

HAS_GPU = Path("/dev/nvidiactl").exists()


@pytest.mark.slow
@pytest.mark.skipif(HAS_GPU, reason="the CPU-machine wording; the GPU one is judged on tests/fixtures/gpu/experience")
def test_default_check_fits_one_screen_and_says_gpu_was_not_verified(tmp_path: Path) -> None:
    # one screen of a 140-column terminal: 50 rows (at 100 columns the same rows wrap into more lines)
    proc = run_cli("check", "--timeout", "300", timeout=400, env={"COLUMNS": "140"})
    assert proc.returncode in (0, 1), proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 50 and max(map(len, lines)) <= 140, proc.stdout
    first_sentence = proc.stdout.split(". ")[0]
    assert "GPU training was not verified: no NVIDIA GPU is visible." in " ".join(lines[:3])
    if proc.returncode == 0:
        assert first_sentence.startswith("Distributed training works here on CPU: 2 gloo ranks ran init_process_group")
    # one row per check: the live phases appear once each, folded over both ranks
    assert sum(1 for x in lines if re.match(r"^\S+ \w+\s+live\.init(\s|$)", x)) == 1
    assert re.search(r"live\.init\s+2/2 ranks", proc.stdout)
    # clean words: no '1 checks', no '(s)'
    assert not re.search(r"\b1 checks\b", proc.stdout) and "rank(s)" not in proc.stdout

    report = tmp_path / "check.json"
    proc = run_cli("check", "--timeout", "300", "--format", "json", "--output", str(report), timeout=400)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(report.read_text())
    assert data["headline"].endswith("GPU training was not verified: no NVIDIA GPU is visible.")
    verbose = run_cli("render", str(report), "-v").stdout
    assert verbose.startswith(data["headline"][:60])
    for phase in ("init", "collectives", "dataloader", "sampler", "ddp", "balance"):  # every rank's row, as before
        assert sum(1 for x in verbose.splitlines() if re.match(rf"^\S+ \w+\s+live\.{phase}\s+rank [01](\s|$)", x)) == 2
    assert not re.search(r"\b1 checks\b", verbose)
