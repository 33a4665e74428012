"""Processes and /dev/shm entries of one run, found through /proc, so none outlives it.

torchrun starts every worker in its own session, so ending torchrun's process group does not
reach the ranks; the parent therefore tracks every descendant it has seen (pid + start time,
so a reused pid is never hit) and ends the stragglers itself.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

SHM = Path("/dev/shm")
# Names torch and NCCL give their segments: torch_<pid>_..., /dev/shm/nccl-XXXXXX, sem.mp-*.
_SHM_PREFIXES = ("torch_", "nccl-", "sem.mp-", "__KMP_REGISTERED_LIB_")


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, session, starttime) of pid, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return int(fields[1]), int(fields[3]), int(fields[19])


def descendants(root: int, known: dict[int, int] | None = None) -> dict[int, int]:
    """pid -> starttime of every living descendant of root, and of every member of a session led by
    one of them or by a process in `known` (pid -> starttime, seen before).

    A process whose parent died is reparented away from root's tree: a DataLoader worker of a rank
    the OOM killer ended outlived the check that way. It stays in the rank's session (torchrun starts
    each rank in a session of its own), and a session's id is not handed to a new process while a
    member lives; a leader alive with another start time is a new process, whose session is not ours.
    """
    children: dict[int, list[int]] = {}
    stats: dict[int, tuple[int, int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        st = _stat(int(entry))
        if st is None:
            continue
        children.setdefault(st[0], []).append(int(entry))
        stats[int(entry)] = st
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found[child] = stats[child][2]
                todo.append(child)
    leaders = {**(known or {}), **found, **({root: stats[root][2]} if root in stats else {})}
    ours = {
        sid for sid, start in leaders.items() if sid != os.getsid(0) and (sid not in stats or stats[sid][2] == start)
    }
    for pid, (_, sid, start) in stats.items():
        if sid in ours and pid != os.getpid():
            found.setdefault(pid, start)
    return found


def alive(tracked: dict[int, int]) -> dict[int, int]:
    """The tracked processes that still exist (same pid, same start time) and are not zombies."""
    living: dict[int, int] = {}
    for pid, start in tracked.items():
        st = _stat(pid)
        if st is None or st[2] != start:
            continue
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            living[pid] = start
    return living


def signal_all(tracked: dict[int, int], sig: signal.Signals) -> None:
    for pid in alive(tracked):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def end_all(tracked: dict[int, int], grace_s: float) -> int:
    """SIGTERM, up to grace_s, then SIGKILL; returns how many were still alive at the start."""
    living = alive(tracked)
    if not living:
        return 0
    signal_all(living, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while alive(living) and time.monotonic() < deadline:
        time.sleep(0.05)
    signal_all(living, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while alive(living) and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(living)


def shm_entries() -> set[str]:
    try:
        return set(os.listdir(SHM))
    except OSError:
        return set()


def _open_shm_names() -> set[str]:
    """Names under /dev/shm that some living process still has open or mapped."""
    in_use: set[str] = set()
    prefix = str(SHM) + "/"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{entry}/fd"):
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
                if target.startswith(prefix):
                    in_use.add(target[len(prefix) :].split(" ")[0])
            with open(f"/proc/{entry}/maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    i = line.find(prefix)
                    if i >= 0:
                        in_use.add(line[i + len(prefix) :].split(" ")[0].rstrip("\n"))
        except OSError:
            continue
    return in_use


def remove_new_shm(before: set[str], pids: Iterable[int]) -> list[str]:
    """Remove /dev/shm entries made during the run by its processes (or by torch/NCCL, unused now)."""
    new = shm_entries() - before
    if not new:
        return []
    pid_tags = {f"_{pid}_" for pid in pids} | {f"-{pid}-" for pid in pids}
    in_use = _open_shm_names()
    removed: list[str] = []
    for name in sorted(new):
        ours = any(tag in name for tag in pid_tags) or name.startswith(_SHM_PREFIXES)
        if ours and name not in in_use:
            try:
                os.unlink(SHM / name)
                removed.append(name)
            except OSError:
                pass
    return removed


def shm_left_behind(before: set[str], since: float) -> list[tuple[str, int]]:
    """(name, bytes) of /dev/shm entries that appeared after `since` (epoch s), belong to this user and no living
    process holds open or mapped: what a job leaked (DeepSpeed's CPU comm leaves deepspeed_allreduce_buffer_*),
    holding RAM until someone deletes them. Call it after remove_new_shm took torch's and NCCL's own."""
    new = shm_entries() - before
    if not new:
        return []
    in_use = _open_shm_names()
    left: list[tuple[str, int]] = []
    for name in sorted(new - in_use):
        try:
            st = os.stat(SHM / name)
        except OSError:
            continue
        if st.st_uid == os.getuid() and st.st_ctime >= since:
            left.append((name, st.st_size))
    return left
