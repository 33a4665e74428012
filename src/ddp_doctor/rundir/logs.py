"""Log tails, and the exit codes torchrun's failure summary prints."""

from __future__ import annotations

import os
import re
from pathlib import Path


def tail_lines(p: Path, lines: int, window_bytes: int = 256 * 1024) -> list[str]:
    """The last `lines` lines of a log, reading at most its last `window_bytes` (logs can be huge)."""
    try:
        with open(p, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - window_bytes))
            data = f.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-lines:]


PER_PROCESS_LINES = 4000
"""A per-process log of a rank (NCCL_DEBUG_FILE's NAME.PID.log) is kept longer: its transport lines are read."""
_PER_PROCESS = re.compile(r"^(.+)\.(\d+)\.log$")


def tails(
    directory: Path, lines: int, window_bytes: int = 256 * 1024, pid_rank: dict[int, int] | None = None
) -> dict[str, list[str]]:
    """Every *.log of the run directory -> its last lines. With pid_rank, a NAME.PID.log written by a rank's
    process is named NAME-rank-R.log and keeps PER_PROCESS_LINES lines."""
    out: dict[str, list[str]] = {}
    for p in sorted(directory.glob("*.log")):
        m = _PER_PROCESS.match(p.name)
        if pid_rank and m and int(m.group(2)) in pid_rank:
            out[f"{m.group(1)}-rank-{pid_rank[int(m.group(2))]}.log"] = tail_lines(p, PER_PROCESS_LINES, window_bytes)
        else:
            out[p.name] = tail_lines(p, lines, window_bytes)
    return out


_EXIT_RE = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)")


def parse_exit_codes(torchrun_log: str) -> dict[str, int]:
    """torchrun's failure summary ("rank : 1 (local_rank: 1)" / "exitcode : -9") -> {"rank 1": -9}."""
    return {f"rank {m.group(1)}": int(m.group(2)) for m in _EXIT_RE.finditer(torchrun_log)}
