"""`ddp-doctor run` on real torchrun + gloo jobs, one per failure mode (tests/jobwatch/jobs/train.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.jobwatch import stacks
from tests.jobwatch.runner import NOPTRACE, env, job_copy, processes_with, run_doctor, torchrun

PYSPY = [str(stacks.pyspy_path() or "py-spy")]

pytestmark = pytest.mark.slow


def test_healthy_job_passes_with_its_own_output_and_exit_code(tmp_path: Path) -> None:
    job = job_copy(tmp_path)
    cmd = torchrun(job, 2, "--steps", "12", "--step-sleep", "0.15")
    ran = run_doctor(tmp_path, ["--stack-sample", "0.5"], cmd)
    assert ran.returncode == 0
    assert ran.report["verdict"] == "pass", ran.report["results"]
    plain = subprocess.run(cmd, capture_output=True, env=env(), cwd=tmp_path, timeout=240, check=False)
    assert plain.returncode == 0
    # Two ranks share one stdout and `python -u` writes a line and its newline separately, so lines of the two
    # ranks interleave differently from run to run (with or without the doctor). Each rank's records, in order,
    # are the same; the byte-for-byte identity is tested on one rank below.
    record = re.compile(rb"rank (\d) (step \d+ loss [\d.]+|done)")
    for rank in (b"0", b"1"):
        mine = [m.group(2) for m in record.finditer(ran.stdout) if m.group(1) == rank]
        theirs = [m.group(2) for m in record.finditer(plain.stdout) if m.group(1) == rank]
        assert mine == theirs and len(mine) == 13
    assert len(ran.stdout) == len(plain.stdout)
    assert ran.result("run.balance.steps")["status"] == "pass"
    assert (ran.run_dir / "rank-0.log").read_bytes().count(b"step") == 12
    assert not processes_with(str(job))


def test_one_rank_job_output_is_byte_identical(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    # Odd bytes: no final newline, non-ASCII text, raw bytes through sys.stdout.buffer, stderr too.
    script.write_text(
        "import sys\n"
        "print('h\\u00e9llo \\u2713', flush=True)\n"
        "sys.stdout.buffer.write(b'\\x00\\xff raw\\r\\n'); sys.stdout.flush()\n"
        "sys.stderr.write('to stderr\\n')\n"
        "sys.stdout.write('no newline at the end')\n"
        "sys.exit(3)\n"
    )
    cmd = [sys.executable, str(script)]
    ran = run_doctor(tmp_path, [], cmd)
    plain = subprocess.run(cmd, capture_output=True, env=env(), cwd=tmp_path, timeout=60, check=False)
    assert ran.stdout == plain.stdout
    assert ran.returncode == plain.returncode == 3
    assert ran.stderr.startswith(plain.stderr)  # the job's stderr first, then the doctor's report
    assert ran.report["verdict"] == "fail"
    assert "h\u00e9llo" in (ran.run_dir / "rank-0.log").read_text()
    # The same script as torchrun's one rank: torchrun prints nothing on stdout, the rank's bytes pass unchanged.
    one = [str(Path(sys.executable).with_name("torchrun")), "--nproc-per-node", "1", str(script)]
    ran1 = run_doctor(tmp_path / "t", [], one) if (tmp_path / "t").mkdir() is None else None
    plain1 = subprocess.run(one, capture_output=True, env=env(), cwd=tmp_path, timeout=120, check=False)
    assert ran1 is not None and ran1.stdout == plain1.stdout == plain.stdout
    assert ran1.returncode == plain1.returncode


def test_a_rank_that_raises_is_named_with_phase_and_traceback(tmp_path: Path) -> None:
    job = job_copy(tmp_path)
    ran = run_doctor(tmp_path, [], torchrun(job, 2, "--mode", "raise"))
    assert ran.returncode == 1
    failure = ran.result("run.failure")
    assert ran.report["root_cause"] == "run.failure"
    assert failure["rank"] == 1
    assert "ValueError: bad batch at step 2 on rank 1" in failure["summary"]
    assert failure["phase"] == "training step (user code)"
    assert any("raise ValueError" in e["text"] for e in failure["evidence"])
    # rank 0's gloo "Connection closed by peer" is the consequence: the class is the job's own failure, not the network.
    assert ran.report["facts"]["run"]["exit_class"] == "job_failed"
    # The hook wrote what @record would have: torchrun's summary names the traceback instead of <N/A>.
    assert "ValueError" in (ran.run_dir / "rank-1.error.json").read_text()
    assert not processes_with(str(job))


def test_a_rank_killed_by_sigkill_is_the_first_failure(tmp_path: Path) -> None:
    job = job_copy(tmp_path)
    ran = run_doctor(tmp_path, ["--exit-code", "verdict"], torchrun(job, 2, "--mode", "sigkill"))
    failure = ran.result("run.failure")
    assert failure["rank"] == 1, failure
    assert "SIGKILL" in failure["summary"]
    assert ran.report["facts"]["run"]["ranks"]["1"]["exitcode"] == -9
    assert ran.report["facts"]["run"]["exit_class"] == "job_failed"
    assert ran.returncode == 1
    assert not processes_with(str(job))


def _assert_hang_named(
    tmp_path: Path,
    job: Path,
    ran_args: list[str],
    method: str,
    wrap: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    ran = run_doctor(
        tmp_path,
        ["--hang-after", "5", "--on-hang", "kill", "--exit-code", "verdict", *ran_args],
        torchrun(job, 2, "--mode", "hang"),
        wrap=wrap,
        extra_env=extra_env,
    )
    hang = ran.result("run.hang")
    assert ran.report["root_cause"] == "run.hang"
    assert hang["rank"] == 1 and hang["observed"]["behind"] == [1], hang
    assert "load_batch" in hang["summary"]
    assert hang["observed"]["kind"] == "collective"
    facts = ran.report["facts"]["run"]["hangs"][0]
    assert set(facts["stacks"]) == {"0", "1"}
    assert {s["method"] for s in facts["stacks"].values()} == {method}
    assert "load_batch" in facts["stacks"]["1"]["text"]
    assert facts["states"]["0"]["state"] == "waiting"
    assert ran.returncode == 10
    # Named within --hang-after + 30 s of the stall (the ranks' start-up takes part of the run).
    assert hang["metrics"]["detected_after_s"] <= ran.report["facts"]["run"]["duration_s"]
    first_step = min(float(v.get("started_s", 0)) for v in ran.report["facts"]["run"]["ranks"].values())
    assert hang["metrics"]["detected_after_s"] - first_step <= 5 + 30 + 30  # start-up (imports, DDP) + window
    assert not processes_with(str(job))
    # A gloo job has no NCCL RAS: asked, and the report says why there is no answer.
    ras = hang["observed"]["ras"]
    assert ras["available"] is False and "nothing listens on localhost:28028" in ras["why_not"], ras
    assert any(e["source"] == "NCCL RAS" and e["text"].startswith("unavailable:") for e in hang["evidence"])
    return hang


def test_a_rank_that_never_enters_the_collective_is_named_py_spy(tmp_path: Path) -> None:
    _assert_hang_named(tmp_path, job_copy(tmp_path), ["--stacks", "py-spy"], "py-spy")


def test_the_same_hang_with_the_hook_forced_uses_the_startup_hook(tmp_path: Path) -> None:
    # Both ranks wait with the GIL released (a collective, a sleep): the hook's thread answers, no signal is sent.
    hang = _assert_hang_named(tmp_path, job_copy(tmp_path), ["--stacks", "hook"], "hook")
    assert "--stacks hook" in hang["observed"]["stacks_method"]
    assert not any((tmp_path / "run" / f"rank-{r}.stack").read_text() for r in (0, 1))


def test_the_lag_is_still_numbered_with_the_flight_recorder_off(tmp_path: Path) -> None:
    # The user switched torch's recorder off (kept: theirs); the process group's own sequence number, which the
    # hook reads on the doctor's request, still says how far the idle rank got.
    hang = _assert_hang_named(
        tmp_path, job_copy(tmp_path), ["--no-flight-recorder"], "py-spy", extra_env={"TORCH_FR_BUFFER_SIZE": "0"}
    )
    assert "(process group sequence number); the others reached #5" in hang["summary"], hang["summary"]


def test_py_spy_is_really_refused_by_the_kernel_under_the_seccomp_filter(tmp_path: Path) -> None:
    """The precondition of the test below: under noptrace.py the kernel itself refuses py-spy (EPERM)."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(1.0)
        allowed = subprocess.run(
            [*PYSPY, "dump", "--pid", str(sleeper.pid)], capture_output=True, text=True, timeout=30, check=False
        )
        assert allowed.returncode == 0 and "Thread" in allowed.stdout, allowed.stderr
        denied = subprocess.run(
            [sys.executable, str(NOPTRACE), *PYSPY, "dump", "--pid", str(sleeper.pid)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert denied.returncode != 0 and "Thread" not in denied.stdout
        assert "EPERM: Operation not permitted" in denied.stderr, denied.stderr
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)


def test_the_same_hang_where_the_kernel_refuses_ptrace_falls_back_to_the_hook(tmp_path: Path) -> None:
    # The doctor and its job run under a seccomp filter that returns EPERM for ptrace and process_vm_readv (what
    # a container without CAP_SYS_PTRACE gets): `--stacks auto` (the default) tries py-spy, reads its refusal and
    # takes the stacks from the startup hook's thread by itself.
    job = job_copy(tmp_path)
    hang = _assert_hang_named(tmp_path, job, [], "hook", wrap=[sys.executable, str(NOPTRACE)])
    method = hang["observed"]["stacks_method"]
    assert "kernel refused py-spy" in method and "EPERM" in method, method
    assert any(e["source"] == "stacks" and "startup hook" in e["text"] for e in hang["evidence"]), hang["evidence"]


def test_a_rank_compiling_longer_than_hang_after_is_not_hung(tmp_path: Path) -> None:
    job = job_copy(tmp_path)
    # A fresh compiler cache: the compile really happens (seconds of CPU in the rank and its compiler children).
    ran = run_doctor(
        tmp_path,
        ["--hang-after", "2", "--on-hang", "kill"],
        torchrun(job, 2, "--mode", "compile"),
        extra_env={"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")},
    )
    assert ran.returncode == 0
    assert not [r for r in ran.report["results"] if r["id"] == "run.hang"]
    quiet = ran.result("run.quiet")
    looks = quiet["observed"]["looks"]
    assert any("compiling" in look["message"] for look in looks), looks


def test_a_straggler_rank_is_named_with_numbers(tmp_path: Path) -> None:
    job = job_copy(tmp_path)
    ran = run_doctor(
        tmp_path, ["--stack-sample", "0.3"], torchrun(job, 2, "--mode", "straggler", "--steps", "40", "--sleep", "0.3")
    )
    assert ran.returncode == 0
    st = ran.result("run.balance.straggler")
    assert st["status"] == "warn" and st["rank"] == 1, st
    assert st["metrics"]["wait_share_rank_0"] - st["metrics"]["wait_share_rank_1"] >= 0.3
    assert "train.py" in (st["observed"]["hot_spot"] or "")
    # The samples came from the hook's thread: no rank was sent SIGURG (faulthandler's dump from a signal handler
    # can crash a rank that is busy making frames), so no rank's faulthandler file holds a dump.
    assert not any((ran.run_dir / f"rank-{r}.stack").read_text() for r in (0, 1))


def test_ddp_unused_parameters_shows_the_exception_line_and_the_signature_s_cause(tmp_path: Path) -> None:
    from ddp_doctor.diagnose import signature

    job = job_copy(tmp_path)
    ran = run_doctor(tmp_path, [], torchrun(job, 2, "--mode", "unused"))
    assert ran.returncode == 1
    failure = ran.result("run.failure")
    # The exception line, never the hint torch prints at the end of the message.
    assert "RuntimeError: Expected to have finished reduction in the prior iteration" in failure["summary"]
    assert "In addition" not in failure["summary"]
    sig = signature("diag.ddp_unused_parameters")
    assert sig is not None and failure["observed"]["diagnosis"] == "diag.ddp_unused_parameters"
    assert failure["cause"] == sig.cause and failure["remedy"] == sig.remedy
    assert failure["phase"] == "the forward pass", failure["phase"]
    assert not processes_with(str(job))


def test_a_failure_at_set_device_is_phased_as_device_setup(tmp_path: Path) -> None:
    job = job_copy(tmp_path)
    ran = run_doctor(tmp_path, [], torchrun(job, 2, "--mode", "set_device"))
    assert ran.returncode == 1
    failure = ran.result("run.failure")
    assert failure["rank"] == 1, failure
    assert failure["phase"].startswith("device setup"), failure["phase"]
    assert "training step" not in failure["summary"]
    assert not processes_with(str(job))


def test_a_dev_shm_entry_the_job_leaves_is_named_and_kept(tmp_path: Path) -> None:
    # A job that makes two /dev/shm entries, unlinks one and leaves the other (what DeepSpeed's CPU comm op does
    # with its deepspeed_allreduce_buffer_*): the one left is named with its size, and it is not the doctor's to delete.
    left = f"ddp-doctor-test-left-{os.getpid()}-{tmp_path.name}"
    tidy = f"ddp-doctor-test-tidy-{os.getpid()}-{tmp_path.name}"
    script = tmp_path / "leak.py"
    script.write_text(
        "import os, sys\n"
        "for name in sys.argv[1:]:\n"
        "    with open('/dev/shm/' + name, 'wb') as f:\n"
        "        f.write(b'x' * 65536)\n"
        "os.unlink('/dev/shm/' + sys.argv[2])\n"
    )
    try:
        ran = run_doctor(tmp_path, [], [sys.executable, str(script), left, tidy])
        cleanup = ran.result("run.cleanup")
        assert cleanup["status"] == "warn", cleanup
        assert left in cleanup["summary"] and tidy not in cleanup["summary"], cleanup["summary"]
        assert cleanup["observed"]["shm_left"] == [{"name": left, "bytes": 65536}]
        assert "rm /dev/shm/NAME" in cleanup["remedy"]
        assert os.path.exists(f"/dev/shm/{left}")  # reported, not deleted
    finally:
        for name in (left, tidy):
            if os.path.exists(f"/dev/shm/{name}"):
                os.unlink(f"/dev/shm/{name}")


def test_a_job_that_leaves_nothing_in_dev_shm_passes_cleanup(tmp_path: Path) -> None:
    ran = run_doctor(tmp_path, [], [sys.executable, "-c", "print('hello')"])
    cleanup = ran.result("run.cleanup")
    assert cleanup["status"] == "pass" and cleanup["summary"] == "no process of the job outlived it", cleanup
