"""The live chain with real torchrun processes on CPU (2 gloo ranks): passes, fails, never hangs, never leaks.

Each test runs `ddp-doctor check` as a user would, with a private TMPDIR (so the run directory
can be checked for removal) and a tag in the environment (so every process of the run can be
found afterwards, whoever its parent is).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from ddp_doctor import resultids
from tests.conftest import run_cli

TAG = "DDP_DOCTOR_TEST_TAG"
SHM_PREFIXES = ("torch_", "nccl-", "sem.mp-")


@dataclass
class Run:
    rc: int
    report: dict[str, Any]
    elapsed_s: float
    stderr: str

    def live(self, id_: str, rank: int | None = None) -> list[dict[str, Any]]:
        return [r for r in self.report["results"] if r["id"] == id_ and (rank is None or r["rank"] == rank)]

    def root(self) -> dict[str, Any]:
        root = self.report["facts"]["live"]["root_cause"]
        assert root is not None, "expected a root cause"
        return root  # type: ignore[no-any-return]


def _tagged(tag: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(TAG) == tag:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def _shm() -> set[str]:
    return {n for n in os.listdir("/dev/shm") if n.startswith(SHM_PREFIXES)}


def assert_nothing_left(tag: str, tmpdir: Path, shm_before: set[str]) -> None:
    left = _tagged(tag)
    assert not left, f"processes of the run survived it: {[(p.pid, p.cmdline()[:4]) for p in left]}"
    assert list(tmpdir.iterdir()) == [], f"left in TMPDIR: {list(tmpdir.iterdir())}"
    assert _shm() - shm_before == set()


def check(tmp_path: Path, *flags: str, fault: str | None = None, timeout: float = 150) -> Run:
    tag = uuid.uuid4().hex
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {"TMPDIR": str(tmpdir), TAG: tag}
    if fault:
        env["DDP_DOCTOR_FAULT"] = fault
    out = tmp_path / "report.json"
    shm_before = _shm()
    started = time.monotonic()
    proc = run_cli("check", "--format", "json", "--output", str(out), *flags, env=env, timeout=timeout)
    elapsed = time.monotonic() - started
    assert out.exists(), f"no report; rc={proc.returncode} stderr={proc.stderr[-2000:]}"
    assert_nothing_left(tag, tmpdir, shm_before)
    return Run(proc.returncode, json.loads(out.read_text()), elapsed, proc.stderr)


@pytest.mark.slow
def test_happy_path_two_gloo_ranks(tmp_path: Path) -> None:
    run = check(tmp_path)
    assert run.rc == 0, run.stderr
    facts = run.report["facts"]["live"]
    assert facts["backend"] == "gloo" and facts["world_size"] == 2 and facts["nnodes"] == "1"
    assert "--standalone" in facts["torchrun"]["argv"]
    assert facts["root_cause"] is None and run.report["root_cause"] is None
    for phase in ("init", "collectives", "dataloader", "sampler", "ddp", "balance"):
        per_rank = {r["rank"]: r["status"] for r in run.live(f"live.{phase}")}
        assert per_rank == {0: "pass", 1: "pass"}, (phase, per_rank)
    for id_ in (
        "live.ddp.param_sync",
        "live.ddp.grad_reference",
        "live.ddp.loss",
        "live.sampler.shards",
        "live.collectives.all_reduce_sum",
        "live.collectives.send_recv_ring",
        "live.dataloader.batches",
    ):
        assert [r["status"] for r in run.live(id_)] == ["pass"], id_
    # Every id the ranks made at run time (live.collectives.<op> too) is declared, with the title shown.
    shown = {r["id"]: r["title"] for r in run.report["results"]}
    assert not [rid for rid in shown if not resultids.declared(rid)], shown
    assert {rid: t for rid, t in shown.items() if t != resultids.DECLARED.get(rid, t)} == {}
    # torch facts came from rank 0, not from an import in the parent
    assert run.report["facts"]["torch"]["source"] == "rank 0"
    # the host units were judged once, over the one record the report carries (--expect-gpus included)
    static = [r["id"] for r in run.report["results"] if r["id"].startswith("env.")]
    assert static and len(static) == len(set(static)), static
    assert "expect_gpus" in run.report["facts"] and "live" in run.report["facts"]
    assert run.report["facts"]["torch"]["version"].startswith("2.")
    timed = run.live("live.init", 0)[0]
    assert timed["node"] and timed["phase"] == "init" and timed["started"] and timed["duration_s"] is not None


def fault_run(tmp_path: Path, fault: str, phase: str, timeout: float, words: str) -> Run:
    run = check(tmp_path, "--timeout", str(timeout), "--batch-mb", "4", fault=fault)
    assert run.rc == 1, run.stderr
    root = run.root()
    assert (root["rank"], root["phase"], root["id"]) == (1, phase, f"live.{phase}"), root
    assert run.report["root_cause"] == f"live.{phase}"
    assert words in root["summary"], root["summary"]
    assert run.elapsed_s < timeout + 10, f"took {run.elapsed_s:.1f} s for --timeout {timeout}"
    return run


@pytest.mark.parametrize(
    ("fault", "phase", "words"),
    [
        ("rank=1,phase=collectives,action=kill", "collectives", "SIGKILL"),
        ("rank=1,phase=ddp,action=raise", "ddp", "injected fault"),
    ],
)
def test_fault_names_rank_and_phase(tmp_path: Path, fault: str, phase: str, words: str) -> None:
    fault_run(tmp_path, fault, phase, 40, words)


def test_rank_that_never_starts(tmp_path: Path) -> None:
    # Long enough that rank 0 gets through its torch import on a loaded 2-core machine (12 s did not at load 13,
    # and rank 0 became the root cause); the init deadline is 0.4 of it.
    timeout = 30
    run = fault_run(tmp_path, "rank=1,action=never_start", "init", timeout, "never started")
    rank0 = run.live("live.init", 0)[0]
    assert rank0["status"] == "fail"
    assert "1 of 2 ranks joined" in rank0["summary"] and "missing: rank 1" in rank0["summary"]
    # Rank 0's own init deadline (0.4 of --timeout) ended it, not the parent's overall one; the margin is the rest of
    # --timeout, so a loaded machine's slow start cannot fail this.
    assert rank0["duration_s"] < timeout


def test_rank_hanging_in_init_leaves_its_stack(tmp_path: Path) -> None:
    run = fault_run(tmp_path, "rank=1,phase=init,action=hang", "init", 15, "rank 1")
    rank1 = run.live("live.init", 1)[0]
    stacks = [e["text"] for e in rank1["evidence"] if e["source"] == "rank-1.stack"]
    assert stacks and "_sleep_forever" in stacks[0], rank1["evidence"]


def test_master_port_taken(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        run = check(tmp_path, "--master-port", str(port), timeout=60)
    assert run.rc == 1
    assert run.report["root_cause"] == "live.launch"
    launch = run.live("live.launch")[0]
    assert f"TCP port {port} is not free" in launch["summary"] and f"pid {os.getpid()}" in launch["summary"]
    assert "--master-port" in launch["remedy"]
    assert not [r for r in run.report["results"] if r.get("rank") is not None]  # no rank was started at all


@pytest.mark.root
@pytest.mark.slow
def test_small_dev_shm_fails_the_dataloader(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "report.json"
    script = (
        "mount --make-rprivate / && mount -t tmpfs -o size=64m tmpfs /dev/shm && "
        f"exec {sys.executable} -m ddp_doctor check --timeout 30 --format json --output {out}"
    )
    env = {**os.environ, "TMPDIR": str(tmpdir), TAG: tag, "NO_COLOR": "1"}
    proc = subprocess.run(
        ["unshare", "-m", "sh", "-c", script], env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(out.read_text())
    root = report["facts"]["live"]["root_cause"]
    assert_nothing_left(tag, tmpdir, set())  # the 64 MB /dev/shm went away with the namespace
    if root["phase"] != "dataloader" and _oom_killed(report, root):
        # The machine ran out of memory and the kernel killed a rank first (seen in a loaded full run:
        # root cause live.init, SIGKILL): the report said so, which is right; the premise is gone.
        pytest.skip(f"the OOM killer ended a rank before the DataLoader ran: {root['summary']}")
    assert root["phase"] == "dataloader", root
    failed = [r for r in report["results"] if r["id"] == "live.dataloader" and r["status"] == "fail"]
    assert failed and all("shm" in (r["remedy"] or "") for r in failed), failed
    assert "diag.shm_exhausted" in failed[0]["observed"]["diagnosis"]


def _oom_killed(report: dict[str, Any], root: dict[str, Any]) -> bool:
    """The root cause is a rank killed by SIGKILL and the report names the OOM killer for it."""
    return any(
        r["id"] == root["id"]
        and r["rank"] == root["rank"]
        and r["observed"].get("exit_code") == -9
        and "diag.sigkill_oom" in r["observed"].get("diagnosis", [])
        for r in report["results"]
    )


def test_worker_refuses_to_run_outside_torchrun(tmp_path: Path) -> None:
    # It refuses before it imports torch, so it can never wait in init_process_group: a torch that
    # exits 99 on import comes first on the path. (A bound on the wall clock failed when a loaded
    # machine ran out of memory and starting Python alone took longer.)
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise SystemExit(99)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHELASTIC_RUN_ID", "DDP_DOCTOR_RUN_DIR")}
    env.update(RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", PYTHONPATH=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "ddp_doctor.live.worker"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "must be started by" in proc.stderr and "world_size=2" in proc.stderr


@pytest.mark.slow
def test_ctrl_c_leaves_nothing_behind(tmp_path: Path) -> None:
    tag = uuid.uuid4().hex
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    shm_before = _shm()
    env = {
        **os.environ,
        "TMPDIR": str(tmpdir),
        TAG: tag,
        "NO_COLOR": "1",
        "DDP_DOCTOR_FAULT": "rank=0,phase=collectives,action=hang;rank=1,phase=collectives,action=hang",
    }
    # A suite started in the background by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and so would
    # the doctor (as Unix wants for background jobs): this test is about a user's Ctrl-C, so the doctor starts with
    # SIGINT's default, as under a terminal (set, then exec: the same process, no preexec_fn in a threaded parent).
    doctor = [sys.executable, "-m", "ddp_doctor", "check", "--timeout", "60"]
    with_default_sigint = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", with_default_sigint, *doctor],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:  # wait until both ranks hang in collectives
            beats = list(tmpdir.glob("ddp-doctor-run-*/rank-*.hb"))
            if len(beats) == 2 and all('"collectives"' in b.read_text() for b in beats if b.exists()):
                break
            time.sleep(0.2)
        else:
            pytest.fail("the ranks never reached collectives")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert_nothing_left(tag, tmpdir, shm_before)


def test_straggler_is_named(tmp_path: Path) -> None:
    # Three ranks, so the median is a rank at normal speed and the slowed one is 8x it. With two the median is
    # their mean and the ratio can never reach 2x (8x gave 1.78x), under the threshold the tool rightly raises
    # when a loaded machine makes a rank's own halves differ by 40% or more (it failed at load 11).
    run = check(
        tmp_path,
        *("--timeout", "90", "--batch-mb", "4", "--nproc", "3", "--oversubscribe"),
        fault="rank=1,phase=balance,action=slow,factor=8",
    )
    assert run.rc == 0, run.stderr
    straggler = run.live("live.balance.straggler")
    assert [r["status"] for r in straggler] == ["warn"], straggler
    assert straggler[0]["observed"]["rank"] == 1 and "rank 1" in straggler[0]["summary"]


def test_overall_deadline_ends_ranks_that_never_report(tmp_path: Path) -> None:
    # Neither rank ever runs a phase, so no in-rank deadline can fire: only the parent's can.
    run = check(tmp_path, "--timeout", "8", fault="rank=0,action=never_start;rank=1,action=never_start")
    assert run.rc == 1
    timeout = run.live("live.timeout")
    assert timeout and timeout[0]["status"] == "fail" and "within 8 s" in timeout[0]["summary"]
    assert {r["rank"] for r in run.live("live.init") if "never started" in r["summary"]} == {0, 1}
    assert run.elapsed_s < 8 + 10
