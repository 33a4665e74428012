"""Taking every rank's stack: py-spy where ptrace is allowed, else the hook's faulthandler."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddp_doctor.jobwatch import stacks
from ddp_doctor.jobwatch.stacks import Stack

FAULTHANDLER_WAIT_S = 2.0


@dataclass
class StackTaker:
    run_dir: Path
    method: str
    """auto | py-spy | faulthandler | off."""
    notes: list[str] = field(default_factory=list)
    """Why a method was not used (py-spy denied by ptrace, ...), once each."""
    _offsets: dict[int, int] = field(default_factory=dict)

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

    # -- cheap sampling (straggler): faulthandler only, asked now, read at the next tick --------
    def request(self, pids: dict[int, int]) -> None:
        self._offsets = {}
        for rank, pid in pids.items():
            offset = self._size(rank)
            if stacks.ask_faulthandler(pid):
                self._offsets[rank] = offset

    def collect(self) -> dict[int, tuple[stacks.Frame, ...]]:
        out: dict[int, tuple[stacks.Frame, ...]] = {}
        for rank, offset in self._offsets.items():
            text = self._read_from(rank, offset)
            if text.strip():
                out[rank] = stacks.main_frames(text, "faulthandler")
        self._offsets = {}
        return out

    # -- full capture (a hang): blocking, every method allowed --------------------------------
    def capture(self, pids: dict[int, int], hook_stacks: bool) -> dict[int, Stack]:
        got: dict[int, Stack] = {}
        if self.method == "off":
            return got
        if self.method in ("auto", "py-spy"):
            for rank, pid in pids.items():
                text, why = stacks.pyspy_dump(pid)
                if text is not None:
                    got[rank] = Stack(text, stacks.main_frames(text, "py-spy"), "py-spy")
                elif why and why not in self.notes:
                    self.notes.append(why)
        todo = {r: p for r, p in pids.items() if r not in got}
        if todo and hook_stacks and self.method in ("auto", "faulthandler"):
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
