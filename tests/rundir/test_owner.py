"""Temp directories whose maker died are removed by the next sweep; a live, foreign or unreadable one never is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ddp_doctor.rundir import owner
from ddp_doctor.rundir.owner import OWNER_FILE, Owner

PREFIX = "ddp-doctor-test-"
_MAKER = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from ddp_doctor.rundir import owner\n"
    "print(owner.make_dir(sys.argv[1], Path(sys.argv[2])), flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def maker(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """A real process that made a directory under tmp_path and sleeps; killed on the way out whatever happens."""
    proc = subprocess.Popen([sys.executable, "-c", _MAKER, PREFIX, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        made = Path(proc.stdout.readline().strip())  # the child prints at once; pytest's timeout bounds a hang
        yield proc, made
    finally:
        proc.kill()
        proc.wait(timeout=30)


def _dir_owned_by(base: Path, who: Owner | str) -> Path:
    path = owner.make_dir(PREFIX, base)
    (path / OWNER_FILE).write_text(who if isinstance(who, str) else who.to_text())
    (path / "payload").write_text("x")
    return path


def test_a_sigkilled_makers_directory_is_removed_and_a_live_ones_is_kept(
    maker: tuple[subprocess.Popen[str], Path], tmp_path: Path
) -> None:
    proc, made = maker
    assert made.parent == tmp_path and (made / OWNER_FILE).is_file()
    assert owner.sweep(PREFIX, tmp_path) == [] and made.is_dir(), "a live maker's directory was removed"
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert made.is_dir(), "SIGKILL leaves the directory behind: the sweep has something to do"
    assert owner.sweep(PREFIX, tmp_path) == [made]
    assert not made.exists()


def test_a_reused_pid_is_not_taken_for_the_maker(tmp_path: Path) -> None:
    me = Owner.me()
    assert me.start_ticks is not None
    reused = _dir_owned_by(tmp_path, replace(me, start_ticks=me.start_ticks + 1))  # this pid, another process
    mine = _dir_owned_by(tmp_path, me)
    assert owner.sweep(PREFIX, tmp_path) == [reused]
    assert mine.is_dir() and not reused.exists()


def test_another_boot_means_the_maker_is_gone(tmp_path: Path) -> None:
    old = _dir_owned_by(tmp_path, replace(Owner.me(), boot_id="00000000-0000-0000-0000-000000000000"))
    assert owner.sweep(PREFIX, tmp_path) == [old]


@pytest.mark.parametrize(
    "who",
    [
        pytest.param(replace(Owner.me(), host="another-node", pid=2**22 + 7), id="another host (a shared /tmp)"),
        pytest.param(replace(Owner.me(), pid_ns="pid:[1]", pid=2**22 + 7), id="another PID namespace (a container)"),
        pytest.param("half an owner li", id="an owner file that is no owner line"),
    ],
)
def test_a_maker_this_host_cannot_judge_keeps_its_directory(tmp_path: Path, who: Owner | str) -> None:
    path = _dir_owned_by(tmp_path, who)
    assert owner.sweep(PREFIX, tmp_path) == []
    assert (path / "payload").is_file()


def test_no_owner_file_another_users_directory_or_a_symlink_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = replace(Owner.me(), pid=2**22 + 7)  # above the largest pid_max: no such process
    assert dead.gone()
    kept = owner.make_dir(PREFIX, tmp_path)
    owner.disown(kept)  # as --keep-run-dir does: the user's now
    (tmp_path / "elsewhere").mkdir()
    target = _dir_owned_by(tmp_path / "elsewhere", dead)
    (tmp_path / f"{PREFIX}link").symlink_to(target)
    assert owner.sweep(PREFIX, tmp_path) == []
    assert kept.is_dir() and (target / "payload").is_file()
    other = _dir_owned_by(tmp_path, dead)
    monkeypatch.setattr(owner.os, "getuid", lambda: os.geteuid() + 1)  # as if another user swept
    assert owner.sweep(PREFIX, tmp_path) == []
    monkeypatch.undo()
    assert owner.sweep(PREFIX, tmp_path) == [other]


def test_an_older_doctors_host_and_pid_owner_file_is_judged_by_the_pid(tmp_path: Path) -> None:
    live = _dir_owned_by(tmp_path, f"{Owner.me().host} {os.getpid()}\n")
    dead = _dir_owned_by(tmp_path, f"{Owner.me().host} {2**22 + 7}\n")
    assert owner.sweep(PREFIX, tmp_path) == [dead]
    assert live.is_dir()


def test_the_owner_line_reads_back() -> None:
    me = Owner.me()
    assert me.boot_id and me.pid_ns and me.start_ticks
    assert Owner.from_text(me.to_text()) == me
    assert not me.gone()
