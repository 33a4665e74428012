"""The real sweep: `ddp-doctor bench` starts torchrun with 2 (and 3) CPU ranks over gloo."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.bench import formulas
from tests.conftest import run_cli


def _bench(*args: str, timeout: float = 150) -> tuple[int, dict[str, Any], str]:
    proc = run_cli("bench", "--backend", "gloo", "--format", "json", *args, timeout=timeout)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout), proc.stderr


@pytest.fixture(scope="module")
def two_ranks() -> dict[str, Any]:
    rc, report, err = _bench(
        "--nproc", "2", "--max-bytes", "64K", "--dtype", "fp32,bf16", "--iters", "5", "--warmup-iters", "2"
    )
    assert rc == 0, (err, [(r["id"], r["summary"]) for r in report["results"]])
    return report


def test_every_op_measured_and_checked(two_ranks: dict[str, Any]) -> None:
    by_id = {r["id"]: r for r in two_ranks["results"]}
    for op in formulas.OPS:
        for dtype in ("fp32",) if op == "barrier" else ("fp32", "bf16"):
            rid = "bench.barrier" if op == "barrier" else f"bench.{op}.{dtype}"
            result = by_id[rid]
            assert result["status"] == "pass", (rid, result["summary"])
            points = result["observed"]["points"]
            assert points
            if op != "barrier":
                assert all(p["check_ok"] is True and p["wrong"] == 0 for p in points), rid
    assert two_ranks["facts"]["world_size"] == 2 and two_ranks["facts"]["backend"] == "gloo"
    assert [d["rank"] for d in two_ranks["facts"]["devices"]] == [0, 1]


def test_points_follow_nccl_tests_definitions(two_ranks: dict[str, Any]) -> None:
    by_id = {r["id"]: r for r in two_ranks["results"]}
    sizes = formulas.sizes(1024, 64 << 10)
    for op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv"):
        points = by_id[f"bench.{op}.fp32"]["observed"]["points"]
        assert sorted({p["bytes"] for p in points}) == sizes, op
        for p in points:
            lay = formulas.layout(op, p["bytes"], 4, 2)
            assert p["count"] == lay.count
            seconds = p["time_us"] / 1e6
            assert p["algbw_gbps"] == pytest.approx(p["bytes"] / 1e9 / seconds, rel=1e-3, abs=1e-4)
            assert p["busbw_gbps"] == pytest.approx(p["algbw_gbps"] * formulas.BUS_FACTOR[op](2), rel=1e-3, abs=1e-4)
    modes = {(p["inplace"]) for p in by_id["bench.all_gather.fp32"]["observed"]["points"]}
    assert modes == {False, True}
    assert {p["inplace"] for p in by_id["bench.all_reduce.fp32"]["observed"]["points"]} == {True}
    assert {p["count"] for p in by_id["bench.all_reduce.bf16"]["observed"]["points"]} == {s // 2 for s in sizes}


def test_three_ranks_odd_world_out_of_place_only() -> None:
    rc, report, err = _bench(
        "--nproc",
        "3",
        "--oversubscribe",  # 3 ranks on a 2-core machine is the point: an odd world size
        "--ops",
        "all_gather,reduce_scatter,all_to_all,sendrecv,all_reduce",
        "--min-bytes",
        "4K",
        "--max-bytes",
        "16K",
        "--iters",
        "3",
        "--out-of-place",
    )
    assert rc == 0, err
    by_id = {r["id"]: r for r in report["results"]}
    for op in ("all_gather", "reduce_scatter", "all_to_all", "sendrecv"):
        points = by_id[f"bench.{op}"]["observed"]["points"]
        assert points and all(p["check_ok"] and p["inplace"] is False for p in points), op
    # torch.distributed's all_reduce has no out-of-place form: said, not faked.
    assert by_id["bench.all_reduce"]["status"] == "skip"
    assert "out-of-place" in by_id["bench.all_reduce"]["summary"]
    # 3 ranks: the whole-buffer size is rounded to whole elements per rank.
    ag = by_id["bench.all_gather"]["observed"]["points"][0]
    assert ag["bytes"] == formulas.layout("all_gather", 4096, 4, 3).size_bytes == 4092


def test_text_output_has_tables_then_verdict() -> None:
    proc = run_cli(
        "bench",
        "--backend",
        "gloo",
        "--nproc",
        "2",
        "--ops",
        "all_reduce,barrier",
        "--max-bytes",
        "4K",
        "--iters",
        "3",
        "--gpu-health",
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # No GPU in CPU ranks: GPU health is skipped with the reason, never passed.
    assert "SKIP  bench.gpu.health" in out and "no CUDA device" in out
    assert out.index("# bench.all_reduce: all_reduce, fp32, 2 ranks, gloo") < out.index("verdict: PASS")
    assert "  time   algbw   busbw #wrong" in out
    assert "        1024           256     float     sum      -1" in out


def test_timeout_reports_where_ranks_were_and_leaves_nothing(tmp_path: Path) -> None:
    before = set(os.listdir("/dev/shm"))
    started = time.monotonic()
    rc, report, _ = _bench(
        "--nproc",
        "2",
        "--ops",
        "all_reduce",
        "--min-bytes",
        "64M",
        "--max-bytes",
        "64M",
        "--iters",
        "100000",
        "--timeout",
        "8",
        timeout=60,
    )
    assert time.monotonic() - started < 40
    assert rc == 1
    launch = {r["id"]: r for r in report["results"]}["bench.launch"]
    assert launch["status"] == "fail"
    assert "did not finish within --timeout 8 s" in launch["summary"] and "all_reduce" in launch["summary"]
    assert report["facts"]["launch"]["timed_out"] is True
    time.sleep(0.5)
    leftover = set(os.listdir("/dev/shm")) - before
    assert not [n for n in leftover if "torch" in n or "ddp" in n], leftover


@pytest.mark.parametrize(
    "args, message",
    [
        (("--ops", "all_reduce,allreduce"), "allreduce"),
        (("--min-bytes", "lots"), "expected a size"),
        (("--min-bytes", "1M", "--max-bytes", "1K"), "min <= max"),
        (("--iters", "0"), "--iters"),
        (("--dtype", "fp64"), "fp64"),
        (("--nproc", "0"), "--nproc"),
        (("--import", "x.log", "--gpu-health"), "--gpu-health"),
    ],
)
def test_bad_flags_exit_2(args: tuple[str, ...], message: str) -> None:
    proc = run_cli("bench", *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="this machine has a GPU: nccl is allowed here")
def test_nccl_without_gpu_is_a_usage_error() -> None:
    proc = run_cli("bench", "--backend", "nccl")
    assert proc.returncode == 2
    assert "needs a visible NVIDIA GPU" in proc.stderr and "--backend gloo" in proc.stderr


def test_killed_rank_is_named_and_earlier_ops_survive() -> None:
    # The live chain's test-only fault switch: rank 1 SIGKILLs itself when all_gather starts.
    proc = run_cli(
        "bench",
        "--backend",
        "gloo",
        "--nproc",
        "2",
        "--ops",
        "all_reduce,all_gather",
        "--max-bytes",
        "4K",
        "--iters",
        "2",
        "--timeout",
        "60",
        "--format",
        "json",
        env={"DDP_DOCTOR_FAULT": "rank=1,phase=all_gather,action=kill"},
        timeout=90,
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    by_id = {r["id"]: r for r in report["results"]}
    assert by_id["bench.all_reduce"]["status"] == "pass"  # measured before the crash, kept
    assert report["root_cause"].startswith("diag.")  # the diagnosis of the dead rank, not its consequences
    launch = by_id["bench.launch"]
    assert launch["status"] == "fail"
    assert "rank 1 was killed by signal 9 (SIGKILL)" in launch["summary"], launch["summary"]
    assert launch["observed"]["exit_codes"].get("rank 1") == -9, launch["observed"]
    # Rank 0 was left waiting in all_gather for its dead peer: that op is an error, not a number.
    assert by_id["bench.all_gather"]["status"] == "error"


def test_ops_none_needs_gpu_health() -> None:
    proc = run_cli("bench", "--ops", "none")
    assert proc.returncode == 2 and "--gpu-health" in proc.stderr


def test_the_parents_config_is_the_ranks_frozen_record() -> None:
    """bench/run.py sends SweepSpec.worker_config() as JSON; the rank reads it once into RankSweep
    (a key one side renames fails here, not in a rank's error file)."""
    import dataclasses

    from ddp_doctor.bench.records import RankSweep
    from ddp_doctor.bench.run import SweepSpec

    spec = SweepSpec(("all_reduce",), ("bf16",), 1024, 4096, (True,), 7, 2, False, 2, "gloo", 60.0, gpu_health=True)
    sent = spec.worker_config()
    got = RankSweep.from_json(sent.to_json())
    assert got == sent
    assert set(json.loads(sent.to_json())) == {f.name for f in dataclasses.fields(RankSweep)}
    assert (got.ops, got.dtypes, got.sizes, got.modes) == (("all_reduce",), ("bf16",), (1024, 2048, 4096), (True,))
    assert (got.iters, got.warmup_iters, got.check, got.backend, got.gpu_health) == (7, 2, False, "gloo", True)
    assert got.pg_timeout_s == 48.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.iters = 1  # type: ignore[misc]
