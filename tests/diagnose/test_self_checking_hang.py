"""A test that prints a result row per completed step (nccl-tests) and stops before its first row hung.

Only when the log shows a communicator being set up or the table's header: a paste of just the lines every rank
prints first stays the beginning of a log (a warning at most), as for any job.
"""

from __future__ import annotations

from ddp_doctor.diagnose import explain_text
from ddp_doctor.report import Status

BANNER = [
    "# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1",
    "#",
    "# Using devices",
    "#   Rank  0 Pid   4242 on      node1 device  0 [0x1a] NVIDIA GeForce RTX 3090",
    "#   Rank  1 Pid   4242 on      node1 device  1 [0x1b] NVIDIA GeForce RTX 3090",
]
STARTUP = [
    "node1:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "node1:4242:4242 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so)",
    "NCCL version 2.18.5+cuda12.2",
]
SETUP = [
    "node1:4242:4250 [0] NCCL INFO Setting affinity for GPU 0 to ffff",
    "node1:4242:4251 [1] NCCL INFO Setting affinity for GPU 1 to ffff",
]
HEADER = [
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
]
ROW = "           8             2     float     sum      -1    20.15    0.00    0.00      0    19.90    0.00    0.00      0"


def _statuses(lines: list[str]) -> dict[str, Status]:
    return {r.id: r.status for r in explain_text("\n".join(lines).encode(), "log")}


def test_nccl_tests_stopped_in_communicator_setup_is_a_hang() -> None:
    assert _statuses(BANNER + STARTUP + SETUP).get("diag.hang") == Status.FAIL


def test_nccl_tests_stopped_at_its_table_header_is_a_hang() -> None:
    assert _statuses(BANNER + HEADER).get("diag.hang") == Status.FAIL


def test_nccl_tests_start_up_lines_alone_are_not_a_failure() -> None:
    assert Status.FAIL not in _statuses(BANNER + STARTUP).values()


def test_nccl_tests_with_its_rows_is_not_a_hang() -> None:
    statuses = _statuses([*BANNER, *STARTUP, *SETUP, *HEADER, ROW, "# Out of bounds values : 0 OK"])
    assert Status.FAIL not in statuses.values()


def test_nccl_tests_wrong_values_are_a_failure() -> None:
    wrong = ROW[: -len("0")] + "2"
    statuses = _statuses([*BANNER, *HEADER, wrong, "# Out of bounds values : 2 FAILED"])
    assert statuses.get("diag.nccl_tests_wrong_results") == Status.FAIL
