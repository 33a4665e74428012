"""Taking every rank's stack: py-spy where ptrace is allowed, else the startup hook's thread, else its faulthandler.

The hook's thread reads the main thread's stack with `sys._current_frames()` when asked through a request file: no
signal reaches the rank. faulthandler (SIGURG) is the last resort, only for a rank whose thread did not answer (one
holding the GIL in C code): its dump from a signal handler can crash a rank that is busy making frames (CPython 3.11,
during torch's imports), so the straggler sampling of a running job never uses it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddp_doctor.jobwatch import stacks
from ddp_doctor.jobwatch.hook import ddp_doctor_heartbeat as rankfiles
from ddp_doctor.jobwatch.stacks import Stack

FAULTHANDLER_WAIT_S = 2.0
HOOK_WAIT_S = 2.0
"""How long a hang capture waits for the hook's thread (it looks four times a second) before it signals a rank."""


@dataclass
class StackTaker:
    run_dir: Path
    method: str
    """auto | py-spy | hook | off."""
    notes: list[str] = field(default_factory=list)
    """Why a method was not used (py-spy denied by ptrace, ...), once each."""
    refused: str | None = None
    """py-spy's error when the kernel refused it (no ptrace here): it is not asked again, the hook answers."""
    _asked: set[int] = field(default_factory=set)
    _token: str = ""
    _serial: int = 0

    def _file(self, rank: int) -> Path:
        return self.run_dir / f"rank-{rank}.stack"

    def _size(self, rank: int) -> int:
        try:
            return os.stat(self._file(rank)).st_size
        except OSError:
            return 0

    def _read_from(self, rank: int, offset: int) -> str:
        try:
            with open(self._file(rank), "rb") as f:
                f.seek(offset)
                return f.read(256 * 1024).decode("utf-8", "replace")
        except OSError:
            return ""

    # -- cheap sampling (straggler): the hook's thread only, asked now, read at the next tick -----
    def request(self, pids: dict[int, int]) -> None:
        self._token = self._new_token()
        self._asked = set(pids)
        rankfiles.ask_for_stacks(str(self.run_dir), self._token)

    def collect(self) -> dict[int, tuple[stacks.Frame, ...]]:
        """The samples that answered the last request (a rank that has not answered yet is left out)."""
        out: dict[int, tuple[stacks.Frame, ...]] = {}
        for rank in self._asked:
            text = rankfiles.read_sample(str(self.run_dir), rank, self._token)
            if text is not None:
                out[rank] = stacks.main_frames(text, "hook")
        self._asked = set()
        return out

    def _new_token(self) -> str:
        self._serial += 1
        return f"{os.getpid()}-{self._serial}"

    def _ask_hook_threads(self, ranks: set[int]) -> dict[int, Stack]:
        """Every rank's main-thread stack from the hook's thread; ranks whose thread did not answer in time are left out."""
        token = self._new_token()
        rankfiles.ask_for_stacks(str(self.run_dir), token)
        got: dict[int, Stack] = {}
        deadline = time.monotonic() + HOOK_WAIT_S
        while True:
            for r in ranks - got.keys():
                text = rankfiles.read_sample(str(self.run_dir), r, token)
                if text is not None:
                    got[r] = Stack(text, stacks.main_frames(text, "hook"), "hook")
            if got.keys() >= ranks or time.monotonic() >= deadline:
                return got
            time.sleep(0.05)

    # -- full capture (a hang): blocking, every method allowed --------------------------------
    def capture(self, pids: dict[int, int], hook_stacks: bool) -> dict[int, Stack]:
        got: dict[int, Stack] = {}
        if self.method == "off":
            return got
        # A kernel refusal holds for the whole run (a seccomp profile, no CAP_SYS_PTRACE): under `auto` py-spy is
        # not asked again, each rank would cost another refused attach.
        if self.method == "py-spy" or (self.method == "auto" and self.refused is None):
            for rank, pid in pids.items():
                text, why = stacks.pyspy_dump(pid)
                if text is not None:
                    got[rank] = Stack(text, stacks.main_frames(text, "py-spy"), "py-spy")
                    continue
                if why and why not in self.notes:
                    self.notes.append(why)
                if stacks.refused_by_kernel(why) and self.refused is None:
                    self.refused = why
                    if self.method == "auto":
                        break
        todo = {r: p for r, p in pids.items() if r not in got}
        if todo and hook_stacks and self.method in ("auto", "hook"):
            got.update(self._ask_hook_threads(set(todo)))
            todo = {r: p for r, p in todo.items() if r not in got}
        if todo and hook_stacks and self.method in ("auto", "hook"):
            # The last resort: a rank whose thread could not run holds the GIL in C code, so no frame is being made.
            offsets = {r: self._size(r) for r in todo}
            asked = {r for r, p in todo.items() if stacks.ask_faulthandler(p)}
            deadline = time.monotonic() + FAULTHANDLER_WAIT_S
            while time.monotonic() < deadline and any(self._size(r) <= offsets[r] for r in asked):
                time.sleep(0.05)
            time.sleep(0.1)  # let the dump finish
            for r in asked:
                text = self._read_from(r, offsets[r])
                if text.strip():
                    got[r] = Stack(text, stacks.main_frames(text, "faulthandler"), "faulthandler")
        return got

    def why_method(self, got: dict[int, Stack]) -> str:
        """Which method took these stacks and why, one sentence for the report."""
        methods = sorted({s.method for s in got.values()})
        if not methods:
            return f"no stacks (--stacks {self.method})" + (f"; {self.notes[-1]}" if self.notes else "")
        if methods == ["py-spy"]:
            return "py-spy (ptrace allowed here)"
        used = " and ".join(_METHOD_WORDS.get(m, m) for m in methods)
        if self.method == "hook":
            return f"{used}: --stacks hook"
        if self.refused is not None:
            return (
                f"{used}, because the kernel refused py-spy: {self.refused.removeprefix('py-spy failed ')}; "
                "no ptrace here (a container without CAP_SYS_PTRACE, a seccomp profile, or yama ptrace_scope)"
            )
        if self.notes:
            return f"{used}, because {self.notes[-1]}"
        return used


_METHOD_WORDS = {
    "hook": "the startup hook's thread (sys._current_frames)",
    "faulthandler": "faulthandler (the startup hook, on SIGURG: that rank's thread could not run)",
}
