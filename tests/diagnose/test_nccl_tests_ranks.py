"""nccl-tests run as separate single-process tests where one job across processes was meant (built without MPI).

Lines in nccl-tests' own formats (src/common.cu): the banner, the device list (current, with Group and Pid; the
oldest, with neither), the closing summary.
"""

from __future__ import annotations

from ddp_doctor.diagnose import explain_text
from ddp_doctor.report import Result

BANNER = "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1"
ROW = "     8388608       2097152     float     sum      -1    85.10   98.57    0.00      0    84.90   98.81    0.00      0"
END = ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0 ", "#"]


def _device(rank: int, pid: int, host: str) -> str:
    return f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host:>10s} device  0 [0x1b] NVIDIA A100-SXM4-80GB"


def _finding(lines: list[str]) -> Result | None:
    results = explain_text("\n".join(lines).encode(), "log")
    return next((r for r in results if r.id == "diag.nccl_tests_without_mpi"), None)


def test_processes_listing_the_same_rank_at_once_are_separate_tests_a_fail() -> None:
    found = _finding(
        [BANNER, BANNER, "# Using devices", "# Using devices", _device(0, 411, "node1"), _device(0, 412, "node1")]
    )
    assert found is not None and found.status.value == "fail" and found.observed["ranks_listed_twice"] == [0]
    assert "MPI=1" in found.remedy


def test_the_oldest_device_list_without_its_hash_is_read_too() -> None:
    # a paste rendered as Markdown drops the leading '#'; nccl-tests' oldest lines name no Pid
    found = _finding(
        [
            "Using devices",
            "   Rank  0 on ip-10-0-0-1 device  0 [0x00] Tesla M60",
            "   Rank  0 on ip-10-0-0-2 device  0 [0x00] Tesla M60",
        ]
    )
    assert found is not None and found.status.value == "fail"


def test_complete_tests_on_different_hosts_each_listing_rank_0_are_a_warning() -> None:
    one = [BANNER, "# Using devices", _device(0, 411, "node1"), ROW, *END]
    two = [BANNER, "# Using devices", _device(0, 977, "node2"), ROW, *END]
    found = _finding(one + two)
    assert found is not None and found.status.value == "warn", found


def test_one_mpi_test_listing_each_rank_once_is_healthy() -> None:
    lines = [BANNER, "# Using devices", _device(0, 411, "node1"), _device(1, 977, "node2"), ROW, *END]
    assert _finding(lines) is None


def test_a_loop_of_single_gpu_tests_on_one_host_is_healthy() -> None:
    one = [BANNER, "# Using devices", _device(0, 411, "node1"), ROW, *END]
    two = [BANNER, "# Using devices", _device(0, 412, "node1"), ROW, *END]
    assert _finding(one + two) is None
