"""The importer on recorded real nccl-tests output (tests/fixtures/bench/README.md names the sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_doctor.bench.nccl_tests_import import import_report, parse
from ddp_doctor.bench.results import points_of
from ddp_doctor.errors import InputError
from ddp_doctor.report import Status
from tests.conftest import FIXTURES, run_cli

BENCH = FIXTURES / "bench"


def _only(path: Path):  # type: ignore[no-untyped-def]
    report = import_report(str(path))
    assert len(report.results) == 1
    return report, report.results[0]


def _at(result, nbytes: int, inplace: bool):  # type: ignore[no-untyped-def]
    (point,) = [p for p in points_of(result) if p["bytes"] == nbytes and p["inplace"] == inplace]
    return point


def test_current_layout_16_h100() -> None:
    report, r = _only(BENCH / "h100_16rank_all_reduce_perf.log")
    assert r.id == "bench.all_reduce" and r.status is Status.PASS
    assert r.observed["op"] == "all_reduce" and r.observed["dtype"] == "fp32" and r.observed["source"] == "nccl-tests"
    assert report.facts["world_size"] == 16
    assert report.facts["devices"][15] == {"rank": 15, "name": "NVIDIA H100 80GB HBM3"}
    assert report.facts["nccl_tests_params"]["iters"] == 20
    points = points_of(r)
    assert len(points) == 62  # 31 sizes, out-of-place and in-place
    last = _at(r, 8589934592, False)
    assert last == {
        "bytes": 8589934592,
        "count": 2147483648,
        "dtype": "fp32",
        "inplace": False,
        "time_us": 47535.0,
        "algbw_gbps": 180.71,
        "busbw_gbps": 338.82,
        "wrong": 0,
        "check_ok": True,
    }
    assert _at(r, 8589934592, True)["busbw_gbps"] == 337.35
    assert r.metrics["peak_busbw_gbps"] == 338.82
    assert r.observed["nccl_tests"]["avg_busbw_gbps"] == 70.742
    # Our "avg" is nccl-tests' definition: the mean busbw of every printed point.
    assert r.metrics["avg_busbw_gbps"] == pytest.approx(70.742, abs=0.01)


def test_mpirun_prefixed_old_layout_with_info_lines() -> None:
    report, r = _only(BENCH / "p4d_16rank_efa_all_reduce_perf_mpirun_prefixed.log")
    assert len(points_of(r)) == 56
    first = _at(r, 8, False)
    assert first["time_us"] == 167.5 and first["max_error"] == 2e-07 and first["check_ok"] is None
    assert _at(r, 1073741824, True)["busbw_gbps"] == 32.84
    # No "# Using devices" lines in this part of the log: n from busbw/algbw = 2(n-1)/n.
    assert report.facts["world_size"] == 16
    assert r.observed["nccl_tests"]["avg_busbw_gbps"] == 7.80081


def test_all_gather_bf16_redop_none() -> None:
    report, r = _only(BENCH / "2gpu_all_gather_perf_bf16.log")
    assert r.observed["op"] == "all_gather" and r.observed["dtype"] == "bf16"
    assert _at(r, 100663296, True)["busbw_gbps"] == 144.59
    assert report.facts["world_size"] == 2  # from busbw/algbw = (n-1)/n


def test_sendrecv_in_place_not_checked() -> None:
    _, r = _only(BENCH / "a40_2node_sendrecv_perf.log")
    assert r.observed["op"] == "sendrecv"
    assert all(p["check_ok"] is True for p in points_of(r) if not p["inplace"])
    assert all(p["check_ok"] is None and p["wrong"] is None for p in points_of(r) if p["inplace"])


def test_alltoall_with_empty_redop_cell() -> None:
    _, r = _only(BENCH / "v100_8node_alltoall_perf_old_format.log")
    assert r.observed["op"] == "all_to_all"
    p = _at(r, 536870912, False)
    assert (p["count"], p["time_us"], p["algbw_gbps"], p["busbw_gbps"]) == (2097152, 1041974.0, 0.52, 0.51)
    # nccl-tests printed 1e+00 for the unchecked in-place alltoall yet "Out of bounds values : 0 OK".
    assert r.status is Status.PASS


def test_out_of_bounds_failed_is_a_failure() -> None:
    _, r = _only(BENCH / "v100_8gpu_all_gather_perf_out_of_bounds.log")
    assert r.status is Status.FAIL
    assert "2 out-of-bounds values" in r.summary
    assert _at(r, 4294967296, False)["busbw_gbps"] == 129.05


def test_root_column_and_noise() -> None:
    _, r = _only(BENCH / "v100_2node_broadcast_perf_noisy.log")
    assert r.observed["op"] == "broadcast"
    assert [p["time_us"] for p in points_of(r)] == [45.82, 38.17]
    assert all(p["check_ok"] is None for p in points_of(r))  # -c 0: N/A


def test_several_tables_in_one_log(tmp_path: Path) -> None:
    combined = tmp_path / "all.log"
    combined.write_text(
        "\n".join((BENCH / f).read_text() for f in ("h100_16rank_all_reduce_perf.log", "2gpu_all_gather_perf_bf16.log"))
    )
    report = import_report(str(combined))
    assert [r.id for r in report.results] == ["bench.all_reduce", "bench.all_gather"]


def test_op_from_hint_when_nothing_names_it(tmp_path: Path) -> None:
    text = (BENCH / "v100_8node_alltoall_perf_old_format.log").read_text()
    bare = tmp_path / "results.txt"
    bare.write_text(text)
    with pytest.raises(InputError, match="which collective"):
        import_report(str(bare))
    assert import_report(str(bare), "all_to_all").results[0].observed["op"] == "all_to_all"
    assert parse(text, "all_to_all").tables[0].groups == 2


def test_cli_import_json_has_the_points() -> None:
    proc = run_cli("bench", "--import", str(BENCH / "h100_16rank_all_reduce_perf.log"), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["command"] == "bench" and data["facts"]["source"] == "nccl-tests"
    (result,) = data["results"]
    point = result["observed"]["points"][0]
    assert set(point) >= {"bytes", "count", "dtype", "time_us", "algbw_gbps", "busbw_gbps", "inplace", "check_ok"}


def test_cli_import_text_prints_the_nccl_tests_table() -> None:
    proc = run_cli("bench", "--import", str(BENCH / "h100_16rank_all_reduce_perf.log"))
    assert proc.returncode == 0, proc.stderr
    assert "#       size         count      type   redop    root     time   algbw   busbw #wrong" in proc.stdout
    assert "  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0" in proc.stdout
    # the header wraps at the width like any paragraph (a long checkout path pushes the verdict to the next line)
    assert "verdict: PASS" in " ".join(proc.stdout.split())


def test_cli_import_failure_exit_1() -> None:
    proc = run_cli("bench", "--import", str(BENCH / "v100_8gpu_all_gather_perf_out_of_bounds.log"))
    assert proc.returncode == 1
    assert "FAIL" in proc.stdout


@pytest.mark.parametrize("content", [b"", b"hello\nno table here\n", b"\x00\x01\x02binary\x00" * 100])
def test_cli_import_bad_input_exit_2(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.log"
    bad.write_bytes(content)
    proc = run_cli("bench", "--import", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.startswith("ddp-doctor: error:") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
    assert bad.read_bytes() == content


def test_cli_import_missing_file_exit_2(tmp_path: Path) -> None:
    proc = run_cli("bench", "--import", str(tmp_path / "nope.log"))
    assert proc.returncode == 2 and "cannot read" in proc.stderr
