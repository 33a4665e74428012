"""The `diagnose()` / `signature()` contract other parts (live chain, bench, image) call."""

from __future__ import annotations

from ddp_doctor.diagnose import diagnose, signature
from ddp_doctor.report import Status


def test_empty_and_healthy_input_gives_nothing() -> None:
    assert diagnose({}) == []
    healthy = ["host:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct", "step 10 loss 0.1"]
    assert diagnose({"rank-0.log": healthy}, {"rank 0": 0, "rank 1": 0}) == []


def test_exit_status_signals_name_the_signature() -> None:
    for code, sid in (
        (-9, "diag.sigkill_oom"),
        (137, "diag.sigkill_oom"),
        (-7, "diag.shm_exhausted"),
        (135, "diag.shm_exhausted"),
    ):
        results = diagnose({}, {"rank 1": code})
        assert [r.id for r in results] == [sid], code
        assert results[0].status is Status.FAIL
        assert results[0].rank == 1
        assert results[0].evidence[0].source == "rank 1"


def test_plain_exit_1_is_not_a_signature_unless_unknown_asked() -> None:
    assert diagnose({}, {"rank 0": 1}) == []
    results = diagnose({}, {"rank 0": 1}, unknown=True)
    assert [r.id for r in results] == ["diag.unknown"] and results[0].status is Status.FAIL


def test_root_cause_first_cascade_last() -> None:
    torchrun = [
        "[rank1]: Traceback (most recent call last):",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "[rank1]: RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible",
    ]
    results = diagnose({"torchrun.log": torchrun}, {"torchrun": 1})
    assert [r.id for r in results] == ["diag.shm_exhausted", "diag.child_failed_no_error_file"]
    shm = results[0]
    assert shm.rank == 1 and shm.evidence[0].line == 3 and "Bus error" in shm.evidence[0].text
    assert shm.cause and shm.remedy and "--shm-size" in shm.remedy


def test_signature_lookup() -> None:
    entry = signature("diag.port_in_use")
    assert entry is not None
    assert entry.severity == Status.FAIL and "EADDRINUSE" in " ".join(p.pattern for p in entry.patterns)
    assert entry.sources and all(s.startswith("https://") for s in entry.sources)
    assert signature("diag.nope") is None


def test_nccl_lines_are_attributed_to_the_rank_their_pid_announced() -> None:
    log = [
        "a:100:110 [0] NCCL INFO comm 0x55d0c0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "a:101:111 [0] NCCL INFO comm 0x55d0c1 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0",
        "a:101:111 [0] init.cc:943 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 18000",
    ]
    (dup,) = diagnose({"nccl.log": log})
    assert dup.id == "diag.duplicate_gpu" and dup.rank == 1 and dup.node == "a"
    assert dup.evidence[0].source == "nccl.log [a, rank 1, gpu 0]" and dup.evidence[0].line == 3


def test_file_headers_name_the_node() -> None:
    log = [
        "==> pod/train-worker-0 <==",
        "step 1 ok",
        "==> pod/train-worker-1 <==",
        "RuntimeError: CUDA error: invalid device ordinal",
    ]
    (res,) = diagnose({"all-pods.log": log})
    assert res.id == "diag.invalid_device_ordinal" and res.node == "pod/train-worker-1"
    assert res.evidence[0].line == 4
