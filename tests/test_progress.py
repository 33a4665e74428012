"""Progress on a real terminal: `check` and `bench` run in tmux, the screen is read while they work."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_doctor import progress
from ddp_doctor.rundir.records import Heartbeat
from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (.ci/run installs it)")

DONE = "DDP-DOCTOR-EXIT="
CHECK_LINE = re.compile(r"^\s+rank 0\s+(\w+)\s+([\d.]+) s( of \d+ s)?", re.MULTILINE)
BENCH_LINE = re.compile(r"^\s+bench: (\w+ \w+ \d+(?:\.\d)? [KMG]?i?B)", re.MULTILINE)
HEADER = re.compile(r"^ddp-doctor (check|bench) · \d+ s$", re.MULTILINE)


class Tmux:
    """One private tmux server (its own socket name), a 140x50 window, gone at the end."""

    def __init__(self) -> None:
        self.socket = f"ddpd-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30, check=True
        ).stdout

    def start(self, command: str) -> None:
        self.tmux("new-session", "-d", "-x", "140", "-y", "50", "-s", "t", "bash", "--norc", "--noprofile")
        self.tmux("send-keys", "-t", "t", command + f"; echo {DONE}$?", "Enter")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "t")

    def watch(self, deadline_s: float) -> tuple[list[str], str]:
        """Every screen seen until the command is done, and the last one."""
        seen: list[str] = []
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            screen = self.screen()
            seen.append(screen)
            if re.search(rf"^{DONE}\d+$", screen, re.MULTILINE):
                # the whole scrollback: a report near 50 lines pushes its first line off a 50-line pane
                return seen, self.tmux("capture-pane", "-p", "-t", "t", "-S", "-")
            time.sleep(0.2)
        raise AssertionError(f"not done within {deadline_s} s; last screen:\n{seen[-1] if seen else ''}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30, check=False)


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux()
    try:
        yield t
    finally:
        t.close()


def _doctor(args: str, pipe: bool = False, env: str = "") -> str:
    run = f"cd {shlex.quote(str(ROOT))} && env -u CI NO_COLOR=1 PYTHONPATH=src {env} {shlex.quote(sys.executable)}"
    return f"{run} -m ddp_doctor {args}" + (" | cat" if pipe else "")


@pytest.mark.slow
def test_check_shows_each_ranks_phase_while_it_runs_and_nothing_when_piped(tmux: Tmux) -> None:
    tmux.start(_doctor("check --timeout 300"))
    seen, last = tmux.watch(400)
    shown = {m.groups()[:2] for s in seen for m in CHECK_LINE.finditer(s)}
    phases = {phase for phase, _ in shown}
    assert len(shown) >= 2, seen[-3:]  # the line changed while the run was going
    assert phases & {"init", "collectives", "dataloader", "sampler", "ddp", "balance"}, phases
    assert any(" of " in m.group(0) for s in seen for m in CHECK_LINE.finditer(s))  # against its deadline
    assert "Distributed training" in last and not HEADER.search(last)  # the display is gone, the report is there

    piped = Tmux()
    try:
        piped.start(_doctor("check --timeout 300", pipe=True))
        seen, last = piped.watch(400)
    finally:
        piped.close()
    assert not any(CHECK_LINE.search(s) or HEADER.search(s) for s in seen)
    assert "Distributed training" in last


@pytest.mark.slow
def test_bench_shows_the_op_and_size_and_nothing_when_piped_or_in_ci(tmux: Tmux) -> None:
    args = "bench --ops all_reduce,all_gather,broadcast --max-bytes 4M --iters 30"
    tmux.start(_doctor(args))
    seen, last = tmux.watch(300)
    steps = {m.group(1) for s in seen for m in BENCH_LINE.finditer(s)}
    assert len(steps) >= 2, seen[-3:]
    assert not HEADER.search(last) and "bench.all_reduce" in last
    for variant in (_doctor(args, pipe=True), _doctor(args, env="CI=true")):
        other = Tmux()
        try:
            other.start(variant)
            seen, last = other.watch(300)
        finally:
            other.close()
        assert not any(BENCH_LINE.search(s) or HEADER.search(s) for s in seen), variant
        assert "bench.all_reduce" in last


def test_wanted_only_for_a_person_at_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(progress, "_isatty", lambda stream: True)
    assert progress.wanted("text", quiet=False, output=None)
    assert not progress.wanted("text", quiet=True, output=None)
    for fmt in ("json", "junit", "sarif"):
        assert not progress.wanted(fmt, quiet=False, output=None)
    monkeypatch.setenv("CI", "true")
    assert not progress.wanted("text", quiet=False, output=None)
    monkeypatch.delenv("CI")
    monkeypatch.setattr(progress, "_isatty", lambda stream: stream is sys.stderr)  # stdout piped
    assert not progress.wanted("text", quiet=False, output=None)
    assert progress.wanted("markdown", quiet=False, output="report.md")


def test_lines_name_phase_deadline_op_and_size() -> None:
    beats = {
        0: Heartbeat("ddp", time=103.0, pid=10, progress=4, step="step 3", since=100.0, deadline=154.0),
        1: Heartbeat("init", time=101.0, pid=11, progress=1),
    }
    assert progress.rank_lines(beats, "starting", now=103.25) == [
        "rank 0  ddp            3.2 s of 54 s  step 3",
        "rank 1  init        ",
    ]
    assert progress.rank_lines({}, "starting torchrun") == ["starting torchrun"]
    bench = {
        0: Heartbeat("bench", time=1.0, pid=10, progress=9, step="all_reduce fp32 1048576 B in-place"),
        1: Heartbeat("bench", time=1.0, pid=11, progress=9),
    }
    assert progress.bench_lines(bench, "") == ["bench: all_reduce fp32 1 MiB in-place", "2 ranks running"]
    assert progress.bytes_lines(3 << 20, 12 << 20, "read") == ["read: 3 MiB of 12 MiB (25%)"]


EXPERIENCE = ROOT / "tests" / "fixtures" / "gpu" / "experience"
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")


def progress_frames(typescript: Path) -> set[tuple[str, str]]:
    """The (phase, elapsed) pairs of rank 0's progress line in a terminal recording."""
    text = _ANSI.sub("\n", typescript.read_bytes().decode("utf-8", "replace"))
    return {m.groups()[:2] for m in CHECK_LINE.finditer(text) if m.group(3)}


def test_recorded_h200_terminal_showed_each_ranks_phase() -> None:
    """gpu/experience.sh runs `check` on the lent H200 inside script(1), a real pseudo-terminal."""
    typescript = EXPERIENCE / "progress.typescript"
    if not typescript.exists():
        pytest.skip(f"fixture missing: run gpu/experience.sh on the GPU machine to record {typescript}")
    frames = progress_frames(typescript)
    assert len(frames) >= 2 and {p for p, _ in frames} & {"init", "collectives", "ddp"}, frames
    report = (EXPERIENCE / "check-tty.txt").read_text()
    assert report.startswith("Distributed training works here on GPU") and "NCCL on the GPU was verified." in report


def test_image_reader_tells_the_layer_and_the_bytes_read(tmp_path: Path) -> None:
    from ddp_doctor.image.audit import audit
    from tests.image import imgbuild

    layers = [imgbuild.layer([("etc/a", "file", b"x" * 5000)]), imgbuild.layer([("etc/b", "file", b"y" * 7000)])]
    archive = imgbuild.docker_archive(tmp_path / "img.tar", layers)
    heard: list[tuple[str, int]] = []
    audit(str(archive), on_layer=lambda what, read: heard.append((progress.layer_lines(what, read)[0], read[0])))
    assert [line.split(" ")[:2] for line, _ in heard] == [["layer", "1/2"], ["layer", "2/2"]], heard
    assert heard[1][1] > 5000  # the second layer starts after the first one's bytes were read


def test_explain_progress_reads_the_stats_the_reader_keeps() -> None:
    from ddp_doctor.diagnose import Stats, explain_stream
    from ddp_doctor.diagnose.logread import open_log

    log = ROOT / "tests" / "fixtures" / "logs" / "cpu-sigkill-rank.log"
    stream, name = open_log(str(log))
    stats = Stats()
    shown = progress.Display("explain", lambda: progress.bytes_lines(stats.bytes_read, log.stat().st_size, name))
    with stream:
        explain_stream(stream, name, stats)
    assert shown.text().splitlines()[1].strip() == (
        f"{name}: {progress.human_bytes(log.stat().st_size)} of {progress.human_bytes(log.stat().st_size)} (100%)"
    )
