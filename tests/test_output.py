"""`--output` writes through what the path is and never replaces a device, a FIFO or a symlink."""

from __future__ import annotations

import json
import os
import pty
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ddp_doctor.report import Report, Result, Status
from tests.conftest import ROOT, run_cli


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    report = Report(command="check", target={"host": "h"})
    report.add(Result("env.shm", "/dev/shm", Status.PASS, "8.0 GiB free"))
    path = tmp_path / "saved.json"
    path.write_text(json.dumps(report.to_dict()))
    return path


def _render_to(saved: Path, output: str | Path, fmt: str = "json") -> subprocess.CompletedProcess[str]:
    return run_cli("render", str(saved), "--format", fmt, "--output", str(output))


def test_regular_file_is_replaced_atomically_and_keeps_its_mode(saved: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    out.write_text("old")
    out.chmod(0o640)
    inode = out.stat().st_ino
    proc = _render_to(saved, out)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["command"] == "check"
    assert out.stat().st_ino != inode  # a new file renamed over the old: readers never see half of it
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "saved.json"]


@pytest.mark.root
def test_device_node_stays_a_device(saved: Path, tmp_path: Path) -> None:
    # The bug this guards: as root, `--output /dev/null` renamed a regular file over the machine's /dev/null.
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    proc = _render_to(saved, null)
    assert proc.returncode == 0, proc.stderr
    st = null.stat()
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null", "saved.json"]  # no temp file left behind


def test_terminal_device_receives_the_report(saved: Path) -> None:
    master, slave = pty.openpty()
    try:
        name = os.ttyname(slave)
        proc = _render_to(saved, name, fmt="text")
        assert proc.returncode == 0, proc.stderr
        got = b""
        while b"env.shm" not in got:
            got += os.read(master, 65536)
        assert stat.S_ISCHR(os.stat(name).st_mode)
    finally:
        os.close(master)
        os.close(slave)


def test_fifo_with_a_reader_gets_the_whole_report(saved: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    try:
        proc = _render_to(saved, fifo)
    finally:
        if reader.is_alive() and not got:
            with open(fifo, "wb"):  # unblock the reader if the writer never opened the FIFO
                pass
        reader.join(30)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(got[0])["command"] == "check"
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_fifo_without_a_reader_is_an_error_not_a_hang(saved: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    proc = _render_to(saved, fifo)
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"ddp-doctor: error: cannot write {fifo}: it is a FIFO and no process has it open for reading"
    )
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_process_substitution(saved: Path) -> None:
    script = f'{sys.executable} -m ddp_doctor render {saved} --format json --output >(wc -c > "$OUT")'
    out = saved.parent / "count"
    env = {**os.environ, "OUT": str(out), "PYTHONPATH": str(ROOT / "src")}
    subprocess.run(["bash", "-c", script + "; wait"], env=env, check=True, timeout=60)
    assert int(out.read_text()) == len(_render_to(saved, "-").stdout)


def test_symlink_stays_and_its_target_is_written(saved: Path, tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target.name)
    assert _render_to(saved, link).returncode == 0
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert json.loads(target.read_text())["command"] == "check"
    dangling = tmp_path / "new-link.json"
    dangling.symlink_to("made-by-doctor.json")
    assert _render_to(saved, dangling).returncode == 0
    assert dangling.is_symlink() and json.loads((tmp_path / "made-by-doctor.json").read_text())


def test_dev_stdout_keeps_the_shells_redirection(saved: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("earlier line\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    with open(log, "a") as f:  # `>> log`: reopening /dev/stdout with O_TRUNC would erase the earlier line
        subprocess.run(
            [sys.executable, "-m", "ddp_doctor", "render", str(saved), "--format", "json", "--output", "/dev/stdout"],
            stdout=f,
            env=env,
            check=True,
            timeout=60,
        )
    text = log.read_text()
    assert text.startswith("earlier line\n") and json.loads(text.split("\n", 1)[1])["command"] == "check"


def test_directory_is_an_input_error(saved: Path, tmp_path: Path) -> None:
    proc = _render_to(saved, tmp_path)
    assert proc.returncode == 2 and "it is a directory" in proc.stderr
