"""Temp directories that name the process which made them, so the next doctor removes those whose maker died.

A doctor ended by SIGKILL or the OOM killer cannot remove its own temp directories (atexit and `finally` never
run); the next doctor on the host removes them before it makes its own. The owner file inside names the
maker: host, boot, PID namespace, pid and the pid's start time. A directory is stale only when that process is
certainly gone: same host, and another boot, or no process with that pid, or one with another start time (a
reused pid). Nothing is judged that cannot be: a directory of another user, a symlink, one whose owner file is
missing or unreadable (being made right now, or kept for the user), one of another host (a shared /tmp) or
another PID namespace (a container sharing /tmp) is left alone.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ddp_doctor.rundir.jsonfile import write_atomic

OWNER_FILE = ".owner"
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip() or "-"
    except OSError:
        return "-"


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").replace(" ", "")
    except OSError:
        return "-"


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        return int(raw[raw.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Owner:
    """The process that made a directory, as its owner file records it."""

    host: str
    pid: int
    boot_id: str | None = None
    """None in an owner file of an older doctor (host and pid only)."""
    pid_ns: str | None = None
    start_ticks: int | None = None

    @classmethod
    def me(cls) -> Owner:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _boot_id(), _pid_namespace(), start_ticks(pid))

    def to_text(self) -> str:
        return f"{self.host} {self.pid} {self.boot_id or '-'} {self.pid_ns or '-'} {self.start_ticks or 0}\n"

    @classmethod
    def from_text(cls, text: str) -> Owner:
        """ValueError for text that is no owner line."""
        fields = text.split()
        if len(fields) == 2:  # an older doctor's "host pid"
            return cls(fields[0], int(fields[1]))
        host, pid, boot, ns, start = fields
        return cls(host, int(pid), boot, ns, int(start) or None)

    def gone(self) -> bool:
        """True only when this process has certainly ended; False when it lives or this host cannot tell."""
        here = Owner.me()
        if self.host != here.host:
            return False
        if self.boot_id is not None and self.boot_id != here.boot_id:
            return self.boot_id != "-" and here.boot_id != "-"
        if self.pid_ns is not None and self.pid_ns != here.pid_ns:
            return False
        now = start_ticks(self.pid)
        return now is None or (self.start_ticks is not None and now != self.start_ticks)


def make_dir(prefix: str, base: Path | None = None) -> Path:
    """A new directory prefix* under base (the temp dir), mode 0700, with this process's owner file."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    write_atomic(path / OWNER_FILE, Owner.me().to_text())
    return path


def disown(path: Path) -> None:
    """The directory is the user's now (kept on request): no later sweep removes it."""
    (path / OWNER_FILE).unlink(missing_ok=True)


def _stale(path: Path) -> bool:
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
        return Owner.from_text((path / OWNER_FILE).read_text()).gone()
    except (OSError, ValueError):
        return False


def sweep(prefix: str, base: Path | None = None) -> list[Path]:
    """Remove the directories prefix* under base (the temp dir) whose owner has certainly ended; the removed."""
    removed = []
    for path in sorted(Path(base or tempfile.gettempdir()).glob(f"{prefix}*")):
        if _stale(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
