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
    refused: str | None = None
    """py-spy's error when the kernel refused it (no ptrace here): it is not asked again, the hook answers."""
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

    def why_method(self, got: dict[int, Stack]) -> str:
        """Which method took these stacks and why, one sentence for the report."""
        methods = sorted({s.method for s in got.values()})
        if not methods:
            return f"no stacks (--stacks {self.method})" + (f"; {self.notes[-1]}" if self.notes else "")
        if methods == ["py-spy"]:
            return "py-spy (ptrace allowed here)"
        used = " and ".join(f"{m} (the startup hook)" if m == "faulthandler" else m for m in methods)
        if self.method == "faulthandler":
            return f"{used}: --stacks faulthandler"
        if self.refused is not None:
            return (
                f"{used}, because the kernel refused py-spy: {self.refused.removeprefix('py-spy failed ')}; "
                "no ptrace here (a container without CAP_SYS_PTRACE, a seccomp profile, or yama ptrace_scope)"
            )
        if self.notes:
            return f"{used}, because {self.notes[-1]}"
        return used
