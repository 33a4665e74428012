"""torch installs without numpy, and torch.distributed's *_object collectives then raise
"Numpy is not available". The chain itself must not need numpy."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import run_cli


def test_chain_passes_where_numpy_cannot_be_imported(tmp_path: Path) -> None:
    # A numpy that is "not installed" for every process of the run, as in a slim image.
    shadow = tmp_path / "site" / "numpy"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')\n")
    pythonpath = os.pathsep.join([str(tmp_path / "site"), *filter(None, [os.environ.get("PYTHONPATH")])])
    proc = run_cli("check", "--format", "json", "--timeout", "120", env={"PYTHONPATH": pythonpath}, timeout=200)
    report = json.loads(proc.stdout)
    failed = [(r["id"], r["summary"]) for r in report["results"] if r["status"] in ("fail", "error")]
    assert proc.returncode == 0, failed
    ids = {r["id"] for r in report["results"]}
    assert {"live.sampler.shards", "live.balance.step_time"} <= ids
    numpy = next(r for r in report["results"] if r["id"] == "env.numpy")
    assert numpy["status"] == "warn" and "all_gather_object" in numpy["summary"]
