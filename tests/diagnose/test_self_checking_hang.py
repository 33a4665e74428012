"""A test that prints a result row per completed step (nccl-tests) and stops before its first row hung.

Only when the log shows the table's header (printed once its communicators are set up): output that stops while
they are set up is read as any job's, a warning, since a paste of a run's first lines cut there looks the same.
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


def test_nccl_tests_stopped_in_communicator_setup_is_a_warning_as_for_any_job() -> None:
    # every GPU at the same set-up line and none missing: a hang, or a paste of a healthy run's first lines
    assert _statuses(BANNER + STARTUP + SETUP).get("diag.hang") == Status.WARN


def test_nccl_tests_stopped_at_its_table_header_is_a_hang() -> None:
    assert _statuses(BANNER + HEADER).get("diag.hang") == Status.FAIL
    assert _statuses(BANNER + STARTUP + SETUP + HEADER).get("diag.hang") == Status.FAIL


def test_the_oldest_banner_without_its_hash_is_known_too() -> None:
    # nccl-tests' first releases printed "nThread ..." without the '#'; a Markdown rendering drops it too
    assert _statuses([BANNER[0].lstrip("# "), *BANNER[1:], *HEADER]).get("diag.hang") == Status.FAIL


def test_nccl_tests_start_up_lines_alone_are_not_a_failure() -> None:
    assert Status.FAIL not in _statuses(BANNER + STARTUP).values()


def test_nccl_tests_with_its_rows_is_not_a_hang() -> None:
    statuses = _statuses([*BANNER, *STARTUP, *SETUP, *HEADER, ROW, "# Out of bounds values : 0 OK"])
    assert Status.FAIL not in statuses.values()


def test_nccl_tests_wrong_values_are_a_failure() -> None:
    wrong = ROW[: -len("0")] + "2"
    statuses = _statuses([*BANNER, *HEADER, wrong, "# Out of bounds values : 2 FAILED"])
    assert statuses.get("diag.nccl_tests_wrong_results") == Status.FAIL


def test_nccl_tests_stopped_after_listing_its_devices_is_not_called_healthy() -> None:
    # its device list, then the empty comment line: the communicators were being set up (a hang or a short paste)
    assert _statuses([*BANNER, "#"]).get("diag.hang") == Status.WARN


# CUDA's p2pBandwidthLatencyTest, in the format its source prints (cuda-samples p2pBandwidthLatencyTest.cu)
P2P_START = [
    "[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]",
    "Device: 0, NVIDIA L40S, pciBusID: 17, pciDeviceID: 0, pciDomainID:0",
    "Device: 1, NVIDIA L40S, pciBusID: 65, pciDeviceID: 0, pciDomainID:0",
    "Device=0 CAN Access Peer Device=1",
    "Device=1 CAN Access Peer Device=0",
    "P2P Connectivity Matrix",
    "     D\\D     0     1",
    "     0\t     1     1",
    "     1\t     1     1",
    "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)",
    "   D\\D     0      1 ",
    "     0 731.12  24.08 ",
    "     1  24.31 735.60 ",
    "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
    "   D\\D     0      1 ",
]
P2P_END = [
    "     0 730.44  26.11 ",
    "     1  26.20 734.91 ",
    "NOTE: The CUDA Samples are not meant for performance measurements. Results may vary when GPU Boost is enabled.",
]


def test_p2p_bandwidth_test_stopped_inside_its_tables_is_not_called_healthy() -> None:
    results = explain_text("\n".join(P2P_START).encode(), "log")
    hang = next(r for r in results if r.id == "diag.hang")
    assert hang.status is Status.WARN and hang.observed["stage"] == "p2p_test", hang.summary
    assert "iommu=pt" in hang.remedy and "p2pBandwidthLatencyTest" in hang.title


def test_p2p_bandwidth_test_that_ran_to_its_note_is_not_a_hang() -> None:
    assert "diag.hang" not in _statuses(P2P_START + P2P_END)


def test_lines_of_numbers_without_the_p2p_test_banner_are_not_its_tables() -> None:
    assert "diag.hang" not in _statuses(P2P_START[5:])


def _slow(value: str) -> list[str]:
    # the same test with P2P on far slower than through the host for the pair 0 -> 1 and 1 -> 0
    return [*P2P_START, f"     0 730.44  {value} ", f"     1  {value} 734.91 ", *P2P_END[2:]]


def test_p2p_copies_slower_than_through_the_host_are_a_fail() -> None:
    results = explain_text("\n".join(_slow("1.20")).encode(), "log")
    slow = next(r for r in results if r.id == "diag.p2p_slower_than_host")
    assert slow.status is Status.FAIL and [(p["src"], p["dst"]) for p in slow.observed["pairs"]] == [(0, 1), (1, 0)]
    assert "iommu=pt" in slow.remedy


def test_p2p_copies_as_fast_as_through_the_host_are_healthy() -> None:
    assert "diag.p2p_slower_than_host" not in _statuses(_slow("26.11"))


def test_a_pair_the_driver_says_cannot_use_p2p_is_not_judged() -> None:
    cannot = [line.replace("1     1", "1     0") if line.startswith("     0\t") else line for line in _slow("1.20")]
    cannot = [line.replace("1     1", "0     1") if line.startswith("     1\t") else line for line in cannot]
    assert "diag.p2p_slower_than_host" not in _statuses(cannot)
