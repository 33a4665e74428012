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


def _nccl(host: str, pid: int, rank: int, nranks: int) -> str:
    return (
        f"{host}:{pid}:{pid + 50} [0] NCCL INFO comm 0x55d0c8a0 rank {rank} nranks {nranks} cudaDev 0 - Init COMPLETE"
    )


def test_a_launch_asking_for_more_ranks_than_the_test_lists_is_a_fail() -> None:
    launch = "mpirun -np 2 -H node1,node2 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 1"
    found = _finding([launch, BANNER, "# Using devices", _device(0, 411, "node1"), ROW, *END])
    assert found is not None and found.status.value == "fail"
    assert found.observed == {"ranks_asked": 2, "ranks_formed": 1}


def test_the_ranks_asked_count_slots_and_gpus_per_process() -> None:
    # Open MPI's -H host:slots gives one process per slot; nccl-tests' -g drives that many GPUs per process
    launch = "mpirun -H node1:2,node2:2 ./build/all_reduce_perf -g 2"
    devices = [_device(r, 400 + r // 2, "node1" if r < 4 else "node2") for r in range(8)]
    assert _finding([launch, BANNER, "# Using devices", *devices, ROW, *END]) is None
    found = _finding([launch, BANNER, "# Using devices", *devices[:2], ROW, *END])
    assert found is not None and found.observed == {"ranks_asked": 8, "ranks_formed": 2}


def test_nccl_counting_one_rank_where_the_launch_asked_for_several_is_a_fail() -> None:
    launch = "srun -N 2 --ntasks-per-node=1 ./build/all_reduce_perf -b 8 -e 1G -f 2"
    found = _finding([launch, BANNER, _nccl("node1", 4100, 0, 1), ROW, *END])
    assert found is not None and found.observed["ranks_formed"] == 1


def test_two_processes_announcing_the_same_nccl_rank_in_nccl_tests_output_is_a_fail() -> None:
    found = _finding([BANNER, _nccl("node1", 4100, 0, 1), _nccl("node2", 5200, 0, 1), ROW])
    assert found is not None and found.status.value == "fail" and found.observed["lines"] == [2, 3]


def test_one_process_announcing_its_rank_twice_and_a_torch_job_s_groups_are_not_read() -> None:
    # older NCCL announces "rank 0 nranks 2" and "comm 0x... rank 0 nranks 2" from the same process
    same = [BANNER, _nccl("node1", 4100, 0, 2), _nccl("node1", 4100, 0, 2), _nccl("node2", 5200, 1, 2), ROW, *END]
    assert _finding(same) is None
    # without nccl-tests' output, single-rank groups on every rank (new_group([rank])) are a torch job's own
    assert _finding([_nccl("node1", 4100, 0, 1), _nccl("node2", 5200, 0, 1)]) is None


def test_one_launch_of_several_processes_printing_a_summary_each_is_a_fail() -> None:
    launch = "mpirun -np 2 ./build/all_reduce_perf -b 8 -e 8M"
    found = _finding([launch, BANNER, ROW, ROW, *END, *END])
    assert found is not None and found.status.value == "fail"
    assert _finding(["mpirun -np 2 ./build/all_reduce_perf", BANNER, ROW, *END]) is None


# A run prints one summary (src/common.cu: the footer, from process 0 only under MPI). A paste of only the end of
# the output still shows it.


def test_two_summaries_with_no_test_started_between_them_are_a_warning() -> None:
    found = _finding([ROW, *END, *END])
    assert found is not None and found.status.value == "warn", found
    assert found.observed["summary_lines"] == [3, 6] and "MPI=1" in found.summary


def test_the_oldest_summary_without_its_hash_is_read_too() -> None:
    old = [" Out of bounds values : 0 OK", " Avg bus bandwidth    : 3.5 ", ""]
    found = _finding([ROW, *old, ROW, *old])
    assert found is not None and found.status.value == "warn"


def test_one_summary_or_tests_each_shown_from_its_start_are_not_read_as_separate_processes() -> None:
    assert _finding([ROW, *END]) is None
    header = "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    assert _finding([ROW, *END, header, ROW, *END]) is None  # a loop: the second test's header follows the summary
    assert _finding([BANNER, ROW, *END, BANNER, ROW, *END]) is None


def _destroy(host: str, pid: int, rank: int) -> str:
    return f"{host}:{pid}:{pid} [{rank}] NCCL INFO comm 0x55c6f1c65b50 rank {rank} nranks 2 cudaDev {rank} - Destroy COMPLETE"


def test_tests_whose_nccl_ranks_were_each_on_one_host_of_their_own_are_a_warning_naming_the_hosts() -> None:
    one = [ROW, _destroy("gpu1", 2832, 0), _destroy("gpu1", 2832, 1), *END]
    two = [BANNER, ROW, _destroy("gpu2", 3255, 0), _destroy("gpu2", 3255, 1), *END]
    found = _finding(one + two)
    assert found is not None and found.status.value == "warn"
    assert found.observed["hosts"] == ["gpu1", "gpu2"] and found.observed["ranks"] == [0, 1]


def test_tests_of_one_mpi_job_across_hosts_run_one_after_another_are_healthy() -> None:
    # each test's communicator spans both hosts: rank 0 on gpu1, rank 1 on gpu2, every time
    test = [BANNER, ROW, _destroy("gpu1", 2832, 0), _destroy("gpu2", 3255, 1), *END]
    assert _finding(test + test) is None
