"""`ddp-doctor explain` as a user runs it: a real process, real files, exit codes 0 / 1 / 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.conftest import run_cli, run_measuring_peak_rss

CASCADE_LOG = """\
W1202 10:00:00.000000 100 torch/distributed/run.py:793] *****************************************
[rank1]: Traceback (most recent call last):
[rank1]:   File "/app/train.py", line 40, in <module>
[rank1]:     for batch in loader:
[rank1]: RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.
W1202 10:00:05.000000 100 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 101 closing signal SIGTERM
E1202 10:00:05.100000 100 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 102) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_10:00:05
  host      : node-a
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 102)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_root_cause_first_then_the_cascade_json(tmp_path: Path) -> None:
    path = _write(tmp_path, "job.log", CASCADE_LOG)
    proc = run_cli("explain", str(path), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    ids = [r["id"] for r in report["results"]]
    assert report["root_cause"] == "diag.shm_exhausted" == ids[0]
    assert ids.index("diag.child_failed_no_error_file") > 0 and ids.index("diag.sigterm") > 0
    root = report["results"][0]
    assert root["rank"] == 1 and root["status"] == "fail"
    assert root["evidence"][0]["line"] == 5 and "Bus error" in root["evidence"][0]["text"]
    assert "--shm-size" in root["remedy"] and root["cause"]
    assert report["facts"]["log"]["lines"] == CASCADE_LOG.count("\n")
    assert report["command"] == "explain" and report["target"] == {"file": str(path)}


def test_text_output_names_cause_and_remedy(tmp_path: Path) -> None:
    proc = run_cli("explain", str(_write(tmp_path, "job.log", CASCADE_LOG)))
    assert proc.returncode == 1
    assert "root cause: diag.shm_exhausted" in proc.stdout
    assert "[rank1]: RuntimeError: DataLoader worker" in proc.stdout  # rank prefixes survive rendering
    assert "--ipc=host" in proc.stdout


def test_stdin_and_gzip(tmp_path: Path) -> None:
    proc = run_cli("explain", "-", "--format", "json", input=CASCADE_LOG)
    assert proc.returncode == 1 and json.loads(proc.stdout)["root_cause"] == "diag.shm_exhausted"
    gz = _write(tmp_path, "job.log.gz", gzip.compress(CASCADE_LOG.encode()))
    proc = run_cli("explain", str(gz), "--format", "json")
    assert proc.returncode == 1 and json.loads(proc.stdout)["root_cause"] == "diag.shm_exhausted"


def test_healthy_log_exits_0(tmp_path: Path) -> None:
    healthy = "host:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\nstep 10 loss 0.1\n"
    proc = run_cli("explain", str(_write(tmp_path, "ok.log", healthy)), "--format", "json")
    assert proc.returncode == 0, proc.stdout
    report = json.loads(proc.stdout)
    assert report["root_cause"] is None and [r["id"] for r in report["results"]] == ["diag.none"]


def test_unknown_failure_is_called_unknown(tmp_path: Path) -> None:
    log = "[rank0]: Traceback (most recent call last):\n[rank0]: ValueError: the flux capacitor is not charged\n"
    proc = run_cli("explain", str(_write(tmp_path, "u.log", log)), "--format", "json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert [r["id"] for r in report["results"]] == ["diag.unknown"]
    unknown = report["results"][0]
    assert unknown["status"] == "fail" and "flux capacitor" in unknown["evidence"][0]["text"]
    assert unknown["evidence"][0]["line"] == 2


def test_warn_only_exits_0_unless_strict(tmp_path: Path) -> None:
    path = _write(tmp_path, "ib.log", "h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0\n")
    assert run_cli("explain", str(path)).returncode == 0
    assert run_cli("explain", str(path), "--strict").returncode == 1


def test_unreadable_inputs_exit_2_with_one_line(tmp_path: Path) -> None:
    for args in (
        ["explain", str(tmp_path / "missing.log")],
        ["explain", str(tmp_path)],
        ["explain", str(_write(tmp_path, "bad.gz", b"\x1f\x8b\x08\x00garbage-not-gzip" * 10))],
    ):
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("ddp-doctor: error:")
        assert "Traceback" not in proc.stderr


def test_binary_file_is_not_a_log(tmp_path: Path) -> None:
    path = _write(tmp_path, "core.bin", bytes(range(256)) * 4000)
    proc = run_cli("explain", str(path), "--format", "json")
    assert proc.returncode == 2 and proc.stdout == ""
    expected = (
        "ddp-doctor: error: core.bin is not a log: 60% of its first 64 KiB is binary, not text; "
        "expected the output of torchrun, NCCL_DEBUG, kubectl logs or a training job"
    )
    assert proc.stderr.strip().splitlines() == [expected]


def test_a_100_mb_line_in_bounded_memory(tmp_path: Path) -> None:
    import sys

    path = tmp_path / "one-line.log"
    with path.open("wb") as f:
        for _ in range(100):
            f.write(b"y" * (1 << 20))
        f.write(b" torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    out_path = tmp_path / "report.json"
    code, peak_rss = run_measuring_peak_rss(
        [sys.executable, "-m", "ddp_doctor", "explain", str(path), "--format", "json"], out_path
    )
    report = json.loads(out_path.read_text())
    assert code == 1 and report["root_cause"] == "diag.cuda_oom"
    assert report["facts"]["log"]["bytes"] > 100 << 20
    assert peak_rss < 200 << 20, f"peak RSS {peak_rss / 2**20:.0f} MiB"


def test_hypothesis_arbitrary_lines_never_crash() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ddp_doctor.diagnose import diagnose

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.text(), max_size=20), st.dictionaries(st.text(max_size=10), st.integers(-300, 300), max_size=4))
    def check(lines: list[str], codes: dict[str, int]) -> None:
        for r in diagnose({"x.log": lines}, codes, unknown=True):
            assert r.id.startswith("diag.") and r.summary

    check()


_TWO_RANKS = """\
import logging, os, time
logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO)
if int(os.environ["RANK"]) == 0:
    time.sleep(1.5)  # fails later; its file is read first
    logging.info("rank 0 stops waiting for its peer")
    raise RuntimeError("rank 0 stopped waiting")
logging.info("rank 1 reads its batch")
raise ValueError("bad batch on rank 1")
"""


def test_a_torchrun_log_dir_names_the_first_failing_rank_across_its_files(tmp_path: Path) -> None:
    import subprocess
    import sys

    job = _write(tmp_path, "job.py", _TWO_RANKS)
    logs = tmp_path / "logs"
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    # A slow monitor lets rank 0 fail too before torchrun stops it: two failures, in two files.
    ran = subprocess.run(
        [
            torchrun,
            "--nproc-per-node",
            "2",
            "--monitor-interval",
            "4",
            "--log-dir",
            str(logs),
            "--redirects",
            "3",
            str(job),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode != 0
    stderr = sorted(logs.glob("*/attempt_0/*/stderr.log"))
    assert len(stderr) == 2 and "RuntimeError" in stderr[0].read_text() and "ValueError" in stderr[1].read_text()

    proc = run_cli("explain", "--format", "json", str(logs))
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    root = report["results"][0]
    # Rank 1 failed first by the logs' own times, though rank 0's file comes first in the directory.
    assert root["observed"]["exception"] == "ValueError" and root["observed"]["origin"] == "local rank 1", root
    assert root["observed"]["failed_after"] == ["local rank 0"]
    assert report["facts"]["log"]["files"] == 2  # the empty stdout.log files are skipped

    # The same files named one by one: the same answer; stdin is read alone.
    again = json.loads(run_cli("explain", "--format", "json", *map(str, stderr)).stdout)
    assert again["results"][0]["observed"]["origin"] == "local rank 1"
    alone = run_cli("explain", "-", str(stderr[0]), input="x\n")
    assert alone.returncode == 2 and "read alone" in alone.stderr


def test_a_directory_without_logs_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "report.json").write_text("{}")
    proc = run_cli("explain", str(tmp_path))
    assert proc.returncode == 2 and "no non-empty log files" in proc.stderr and "Traceback" not in proc.stderr
