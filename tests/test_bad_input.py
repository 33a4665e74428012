"""Bad input is exit 2 with one line, never exit 3 (a crash log) and never a PASS: each case as a user
meets it, through the installed console script; the unprivileged ones really run as another uid."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import DOCTOR, run_cli

NOBODY = 65534
ERROR = "ddp-doctor: error: "


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory another uid can enter (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="ddp-doctor-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_nobody(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script as uid/gid 65534 with no supplementary groups, through setpriv."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux) to become another user")
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", str(DOCTOR), *args]
    full = {**os.environ, "NO_COLOR": "1", "HOME": str(cwd), "TMPDIR": str(cwd), **(env or {})}
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=full, timeout=120, check=False)


def one_line(proc: subprocess.CompletedProcess[str], *parts: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-500:], proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR), lines
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def test_render_of_json_nested_200k_deep(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    one_line(run_cli("render", str(deep), "--format", "html", console=True), "nested too deeply")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1, 2]", "the report is a JSON array, expected an object"),
        ('"text"', "the report is a JSON string, expected an object"),
        ('{"schema_version": 1, "results": [1]}', "the field 'command' is missing"),
        ('{"schema_version": 1, "command": "check", "results": [1]}', "a result is a JSON number"),
        ('{"schema_version": 1, "command": "check", "results": [{"id": 5}]}', "the field 'id' is a JSON number"),
        ('{"schema_version": 1, "command": "check", "facts": []}', "the field 'facts' is a JSON array"),
    ],
)
def test_render_of_json_that_is_not_a_report(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "rep.json"
    path.write_text(text)
    one_line(run_cli("render", str(path), console=True), f"{path} is not a ddp-doctor JSON report: {says}")


def test_run_dir_that_is_an_existing_file(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("mine\n")
    proc = run_cli("run", "--run-dir", str(tmp_path / "taken"), "--", "true", console=True)
    one_line(proc, f"--run-dir {tmp_path}/taken exists and is not a directory")
    assert (tmp_path / "taken").read_text() == "mine\n"


def test_run_in_a_read_only_working_directory_as_a_user(public_dir: Path) -> None:
    (public_dir / "job").mkdir(mode=0o555)
    proc = as_nobody("run", "--", "true", cwd=public_dir / "job")
    one_line(proc, "cannot make the run directory ddp-doctor-runs/", "Permission denied", "pass --run-dir DIR")


def test_image_on_an_unreadable_file_as_a_user(public_dir: Path) -> None:
    secret = public_dir / "image.tar"
    secret.write_bytes(b"\0" * 1024)
    secret.chmod(0o600)
    one_line(as_nobody("image", str(secret), cwd=public_dir), f"cannot read {secret}: Permission denied")


def test_image_on_a_rootfs_with_an_unreadable_directory_as_a_user(public_dir: Path) -> None:
    # What /usr holds is unknown to this user: "no python in the image" would be a guess.
    rootfs = public_dir / "rootfs"
    (rootfs / "usr" / "bin").mkdir(parents=True)
    (rootfs / "usr" / "bin" / "python3").write_bytes(b"\x7fELF")
    (rootfs / "usr").chmod(0o700)
    proc = as_nobody("image", str(rootfs), cwd=public_dir)
    one_line(proc, f"cannot read {rootfs}/usr: permission denied")


def test_check_static_on_an_ascii_terminal_degrades_characters() -> None:
    proc = run_cli("check", "--static", env={"PYTHONIOENCODING": "ascii"}, console=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    assert "internal error" not in proc.stderr and proc.stdout.isascii()
    assert "ddp-doctor check - host" in proc.stdout  # the em dash of the title, as '-'


def test_explain_with_stdout_closed(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error\n")
    closed = subprocess.run(
        f"exec {DOCTOR} explain {log} >&-", shell=True, capture_output=True, text=True, timeout=60, check=False
    )
    one_line(closed, "standard output is closed: pass --output FILE")
    written = subprocess.run(
        f"exec {DOCTOR} explain {log} -o {tmp_path}/r.txt >&-",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert written.returncode == 1 and "NCCL" in (tmp_path / "r.txt").read_text()


def _random(n: int) -> bytes:
    return random.Random(23).randbytes(n)


NOT_LOGS = {
    "empty.log": (b"", "empty.log is empty: there is no log to explain"),
    "random.bin": (_random(1 << 20), "random.bin is not a log: "),
    "zeros.log": (b"\0" * 100_000, "zeros.log holds only NUL bytes, not a log"),
    "corrupt.gz": (b"\x1f\x8b" + _random(2000), "cannot read corrupt.gz"),
    "truncated.gz": (gzip.compress(b"RuntimeError: NCCL error\n" * 5000)[:300], "cannot read truncated.gz"),
    "corrupt.zst": (b"\x28\xb5\x2f\xfd" + _random(2000), "cannot read corrupt.zst"),
    "random.gz": (gzip.compress(_random(200_000)), "random.gz is not a log"),
}


@pytest.mark.parametrize("name", list(NOT_LOGS))
def test_explain_of_something_that_is_not_a_log(tmp_path: Path, name: str) -> None:
    data, says = NOT_LOGS[name]
    (tmp_path / name).write_bytes(data)
    proc = run_cli("explain", str(tmp_path / name), console=True)
    one_line(proc, says)
    assert proc.stdout == ""


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_explain_of_a_character_device_ends_at_once(device: str) -> None:
    one_line(run_cli("explain", device, console=True, timeout=20), f"{device} is a character device, not a log file")


def test_explain_of_endless_zeros_on_stdin_ends() -> None:
    with open("/dev/zero", "rb") as zeros:
        proc = subprocess.run(
            [str(DOCTOR), "explain", "-"], stdin=zeros, capture_output=True, text=True, timeout=20, check=False
        )
    one_line(proc, "stdin holds only NUL bytes, not a log")


def test_a_log_with_colours_progress_bars_and_latin1_is_still_a_log(tmp_path: Path) -> None:
    lines = [
        b"\x1b[32mINFO\x1b[0m step 1\r step 2\r step 3\n",
        "caf\xe9 d\xe9j\xe0 vu (latin-1)\n".encode("latin-1"),
        "[rank0]: torch.distributed.DistBackendError: NCCL error — ünïcödé\n".encode(),
        b"\0" * 4096,  # a crash's unwritten tail
    ]
    log = tmp_path / "job.log"
    log.write_bytes(b"".join(lines) * 50)
    proc = run_cli("explain", str(log), console=True)
    assert proc.returncode == 1, proc.stderr


@pytest.mark.parametrize(
    "launcher",
    [
        ["torchrun", "--nproc-per-node", "2"],
        ["python3"],
        ["python3", "-m", "torch.distributed.run", "--nproc-per-node=1"],
    ],
)
def test_run_of_a_script_that_does_not_exist_names_it_before_starting(tmp_path: Path, launcher: list[str]) -> None:
    if launcher[0] == "torchrun":
        launcher = [str(DOCTOR.with_name("torchrun")), *launcher[1:]]
    proc = run_cli(
        "run", "--run-dir", "evidence", "--", *launcher, "missing.py", "--lr", "1e-3", console=True, cwd=tmp_path
    )
    name = Path(launcher[0]).name
    one_line(
        proc, f'the script {tmp_path}/missing.py does not exist; {name} would fail at once with "can\'t open file"'
    )
    assert not (tmp_path / "evidence").exists()  # nothing started, no run directory


def test_run_judges_only_what_the_launcher_itself_opens(tmp_path: Path) -> None:
    # python -c CODE: the words after it are the code's argv; a wrapper may run the script elsewhere.
    ran = run_cli(
        "run", "--run-dir", "e1", "--", "python3", "-c", "print('ran')", "nothere.py", console=True, cwd=tmp_path
    )
    assert ran.returncode == 0 and ran.stdout == "ran\n", ran.stderr
    wrapped = run_cli("run", "--run-dir", "e2", "--", "env", "python3", "-c", "pass", console=True, cwd=tmp_path)
    assert wrapped.returncode == 0, wrapped.stderr


def test_variables_are_judged_once_through_the_console_script() -> None:
    """NCCL_DEBUG= is NCCL's unset, RANK=abc one warning (torchrun replaces it), CUDA_VISIBLE_DEVICES=abc
    on a host without a GPU hides every GPU; each said by one check, never a 'works' beside a FAIL."""
    env = {"NCCL_DEBUG": "", "RANK": "abc", "CUDA_VISIBLE_DEVICES": "abc"}
    proc = run_cli("check", "--static", "--format", "json", env=env, console=True, timeout=180)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    by_id = {r["id"]: r for r in report["results"]}
    env_vars, dist_vars = by_id["env.env_vars"], by_id["env.dist_vars"]
    assert "NCCL_DEBUG is empty: NCCL reads it as unset" in dist_vars["summary"]
    assert "NCCL_DEBUG" not in env_vars["summary"] and "debug output is on" not in env_vars["summary"]
    assert env_vars["status"] == "warn" and env_vars["summary"].count("RANK=") == 1
    assert "torchrun replaces it" in env_vars["summary"]
    if not Path("/dev/nvidiactl").exists():
        assert "CUDA_VISIBLE_DEVICES='abc' hides every GPU" in env_vars["summary"]
    failed = [r["id"] for r in report["results"] if r["status"] == "fail"]
    assert not (failed and " works here" in report["headline"]), (failed, report["headline"])


def test_an_unreadable_baseline_is_refused_before_the_sweep_as_a_user(public_dir: Path) -> None:
    base = public_dir / "base.json"
    base.write_text('{"schema_version": 1, "command": "bench", "results": []}')
    base.chmod(0o600)
    one_line(
        as_nobody("bench", "--baseline", str(base), cwd=public_dir), f"cannot read baseline {base}: Permission denied"
    )
    assert not [p for p in public_dir.iterdir() if p.name.startswith("ddp-doctor-run-")]  # no rank started
