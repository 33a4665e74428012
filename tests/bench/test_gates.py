"""--baseline and --min-busbw, on real files through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FIXTURES, run_cli

H100 = str(FIXTURES / "bench" / "h100_16rank_all_reduce_perf.log")


def _baseline_scaled(tmp_path: Path, factor: float) -> Path:
    """The H100 import as JSON, with every busbw/algbw multiplied by factor (time divided)."""
    proc = run_cli("bench", "--import", H100, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for result in data["results"]:
        for p in result["observed"]["points"]:
            p["busbw_gbps"] *= factor
            p["algbw_gbps"] *= factor
            p["time_us"] /= factor
    path = tmp_path / f"baseline-{factor}.json"
    path.write_text(json.dumps(data))
    return path


def _results(proc) -> dict[str, dict]:  # type: ignore[no-untyped-def]
    return {r["id"]: r for r in json.loads(proc.stdout)["results"]}


def test_regression_over_10_percent_fails(tmp_path: Path) -> None:
    # Baseline 15% faster than now: now is a 13% regression.
    proc = run_cli("bench", "--import", H100, "--baseline", str(_baseline_scaled(tmp_path, 1.15)), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    gate = _results(proc)["bench.baseline.all_reduce"]
    assert gate["status"] == "fail"
    assert gate["metrics"]["change_pct"] < -10
    assert "expected no more than 10% below the baseline" in gate["summary"]


def test_small_change_passes_and_threshold_is_configurable(tmp_path: Path) -> None:
    base = str(_baseline_scaled(tmp_path, 1.05))
    proc = run_cli("bench", "--import", H100, "--baseline", base, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert _results(proc)["bench.baseline.all_reduce"]["status"] == "pass"
    strict = run_cli("bench", "--import", H100, "--baseline", base, "--max-regression", "3", "--format", "json")
    assert strict.returncode == 1


def test_baseline_can_be_an_nccl_tests_log() -> None:
    proc = run_cli("bench", "--import", H100, "--baseline", H100, "--format", "json")
    assert proc.returncode == 0
    assert _results(proc)["bench.baseline.all_reduce"]["metrics"]["change_pct"] == 0.0


def test_min_busbw_gate() -> None:
    fail = run_cli("bench", "--import", H100, "--min-busbw", "400", "--format", "json")
    assert fail.returncode == 1
    gate = _results(fail)["bench.min_busbw.all_reduce"]
    assert gate["status"] == "fail" and "338.82 GB/s" in gate["summary"] and "400" in gate["summary"]
    ok = run_cli("bench", "--import", H100, "--min-busbw", "300", "--format", "junit")
    assert ok.returncode == 0
    assert 'name="bench.min_busbw.all_reduce"' in ok.stdout


def test_bad_baseline_exit_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1, "command": "check"')
    proc = run_cli("bench", "--import", H100, "--baseline", str(broken))
    assert proc.returncode == 2 and proc.stderr.startswith("ddp-doctor: error: baseline")
    other = tmp_path / "check.json"
    other.write_text(json.dumps({"schema_version": 1, "command": "check", "target": {}, "results": []}))
    proc = run_cli("bench", "--import", H100, "--baseline", str(other))
    assert proc.returncode == 2 and "no bench results" in proc.stderr
