"""The formulas against nccl-tests' definitions and against numbers nccl-tests itself printed."""

from __future__ import annotations

import pytest

from ddp_doctor.bench import formulas
from ddp_doctor.bench.nccl_tests_import import import_report
from ddp_doctor.bench.results import points_of
from tests.conftest import FIXTURES

BENCH = FIXTURES / "bench"


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 1.75),
        ("all_reduce", 16, 1.875),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 2, 0.5),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("sendrecv", 2, 1.0),
        ("all_reduce", 1, 0.0),
    ],
)
def test_bus_factor_is_nccl_tests_summary(op: str, n: int, factor: float) -> None:
    # doc/PERFORMANCE.md, "Summary": 2(n-1)/n, (n-1)/n, 1
    assert formulas.BUS_FACTOR[op](n) == pytest.approx(factor)


def test_layout_follows_get_coll_byte_count() -> None:
    # 32 MiB of float on 8 ranks, as setupArgs/GetCollByteCount compute it.
    size, elem, n = 32 << 20, 4, 8
    ar = formulas.layout("all_reduce", size, elem, n)
    assert (ar.count, ar.size_bytes) == (size // 4, size)
    ag = formulas.layout("all_gather", size, elem, n)
    assert (ag.count, ag.send_elems, ag.recv_elems, ag.size_bytes) == (size // 32, size // 32, size // 4, size)
    rs = formulas.layout("reduce_scatter", size, elem, n)
    assert (rs.count, rs.send_elems, rs.recv_elems, rs.size_bytes) == (size // 32, size // 4, size // 32, size)
    a2a = formulas.layout("all_to_all", size, elem, n)
    assert (a2a.count, a2a.size_bytes) == (size // 32, size)
    # A size that does not divide by the ranks is rounded down to whole elements per rank.
    odd = formulas.layout("all_gather", 1000, 4, 3)
    assert (odd.count, odd.size_bytes) == (83, 83 * 3 * 4)


def test_bandwidths_in_gb_per_second_of_1e9_bytes() -> None:
    assert formulas.algbw_gbps(1_000_000_000, 0.5) == pytest.approx(2.0)
    assert formulas.busbw_gbps("all_reduce", 1_000_000_000, 0.5, 4) == pytest.approx(3.0)
    assert formulas.algbw_gbps(100, 0.0) == 0.0


def test_sizes_double_inclusive() -> None:
    assert formulas.sizes(1024, 8192) == [1024, 2048, 4096, 8192]
    assert formulas.sizes(1000, 1000) == [1000]
    assert formulas.sizes(3000, 5000) == [3000]


@pytest.mark.parametrize(
    ("fixture", "nranks"),
    [
        ("h100_16rank_all_reduce_perf.log", 16),
        ("p4d_16rank_efa_all_reduce_perf_mpirun_prefixed.log", 16),
        ("2gpu_all_gather_perf_bf16.log", 2),
        ("a40_2node_sendrecv_perf.log", 2),
    ],
)
def test_our_formulas_reproduce_nccl_tests_printed_numbers(fixture: str, nranks: int) -> None:
    """algbw = size / time and busbw = algbw * factor, recomputed from the printed size and time."""
    report = import_report(str(BENCH / fixture))
    (result,) = report.results
    op = result.observed["op"]
    checked = 0
    for p in points_of(result):
        if p["algbw_gbps"] < 0.05:  # printed with 2 decimals: nothing left to compare
            continue
        seconds = p["time_us"] / 1e6
        # Printed values are rounded to 2 decimals and the time to 4 significant digits.
        assert formulas.algbw_gbps(p["bytes"], seconds) == pytest.approx(p["algbw_gbps"], rel=0.01, abs=0.006)
        assert formulas.busbw_gbps(op, p["bytes"], seconds, nranks) == pytest.approx(
            p["busbw_gbps"], rel=0.01, abs=0.006
        )
        checked += 1
    assert checked >= 4
