"""Result building for the outcomes a real sweep can have: wrong values, unsupported, raised."""

from __future__ import annotations

from ddp_doctor.bench.results import op_result
from ddp_doctor.bench.table import render_result
from ddp_doctor.report import Status


def _point(nbytes: int, inplace: bool, wrong: int | None) -> dict[str, object]:
    return {
        "bytes": nbytes,
        "count": nbytes // 4,
        "dtype": "fp32",
        "inplace": inplace,
        "time_us": 100.0,
        "algbw_gbps": nbytes / 1e9 / 1e-4,
        "busbw_gbps": nbytes / 1e9 / 1e-4,
        "wrong": wrong,
        "check_ok": None if wrong is None else wrong == 0,
    }


def test_wrong_values_fail_with_where_and_how_many() -> None:
    points = [_point(1024, False, 0), _point(1024, True, 0), _point(2048, False, 3), _point(4096, True, 5)]
    r = op_result(
        "all_gather", "fp32", {"status": "ok", "points": points}, several_dtypes=False, world_size=2, backend="nccl"
    )
    assert r.status is Status.FAIL
    assert "2 of 4 points" in r.summary and "first at 2 KiB, out-of-place" in r.summary and "8 wrong" in r.summary
    assert r.remedy and "NCCL_P2P_DISABLE=1" in r.remedy


def test_unsupported_and_error() -> None:
    skip = op_result(
        "sendrecv",
        "fp32",
        {"status": "unsupported", "reason": "send/recv needs at least 2 ranks"},
        several_dtypes=False,
        world_size=1,
        backend="nccl",
    )
    assert skip.status is Status.SKIP and "2 ranks" in skip.summary
    err = op_result(
        "all_to_all",
        "bf16",
        {"status": "error", "error": "RuntimeError: boom"},
        several_dtypes=True,
        world_size=2,
        backend="gloo",
    )
    assert err.id == "bench.all_to_all.bf16" and err.status is Status.ERROR and "boom" in err.summary


def test_table_row_shape() -> None:
    r = op_result(
        "all_reduce",
        "fp32",
        {"status": "ok", "points": [_point(1048576, True, 0)]},
        several_dtypes=False,
        world_size=2,
        backend="gloo",
    )
    text = render_result(r)
    row = next(ln for ln in text.splitlines() if ln.startswith("     1048576"))
    assert row.split() == [
        "1048576",
        "262144",
        "float",
        "sum",
        "-1",
        "N/A",
        "N/A",
        "N/A",
        "N/A",
        "100.0",
        "10.49",
        "10.49",
        "0",
    ]
    assert "# Avg bus bandwidth    : 10.4858" in text


def test_one_rank_is_not_an_interconnect_number() -> None:
    r = op_result(
        "broadcast",
        "fp32",
        {"status": "ok", "points": [_point(1 << 30, True, 0)]},
        several_dtypes=False,
        world_size=1,
        backend="nccl",
    )
    assert r.status is Status.SKIP and "nothing moves between devices" in r.summary
    assert "GB/s" not in r.summary and not r.metrics and r.observed["points"] == []
    assert r.observed["call_times"][0]["bytes"] == 1 << 30
    from ddp_doctor.bench.table import render_result

    assert "GB/s" not in render_result(r) and "Avg bus bandwidth" not in render_result(r)


def test_a_figure_above_the_physical_link_limit_is_an_invalid_measurement() -> None:
    fast = {**_point(1 << 30, True, 0), "time_us": 100.0, "algbw_gbps": 10737.0, "busbw_gbps": 10737.0}
    r = op_result(
        "all_reduce", "fp32", {"status": "ok", "points": [fast]}, several_dtypes=False, world_size=2, backend="nccl"
    )
    assert r.status is Status.WARN and r.summary.startswith("invalid measurement") and "900 GB/s" in r.summary
    ok = op_result(
        "all_reduce",
        "fp32",
        {"status": "ok", "points": [{**fast, "busbw_gbps": 350.0, "algbw_gbps": 350.0}]},
        several_dtypes=False,
        world_size=2,
        backend="nccl",
    )
    assert ok.status is Status.PASS
