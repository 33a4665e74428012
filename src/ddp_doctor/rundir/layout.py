"""Where each file of a run directory is: `rank-N.<kind>` beside the launcher's own logs.

rank-N.json        the rank's result (live chain, bench), rewritten atomically after every phase
rank-N.hb          the rank's heartbeat: the phase it is in (live chain, bench)
rank-N.stack       faulthandler's stacks of the rank (SIGURG: the last resort of jobwatch, the live chain's watchdog)
rank-N.sample      the main thread's stack, answering the doctor's stack.request (jobwatch's hook thread)
rank-N.log         the rank's stdout and stderr
rank-N.error.json  torchelastic's error file of an uncaught exception (`@record` or jobwatch's hook)
rank-N.pid         who the rank is (jobwatch's hook)
rank-N.exit        how the rank's Python ended (jobwatch's hook)
"""

from __future__ import annotations

import os
import re
from pathlib import Path

RUN_DIR_ENV = "DDP_DOCTOR_RUN_DIR"
"""Names the run directory to every rank started by live.launch."""
NODE_ENV = "DDP_DOCTOR_NODE"
"""The node's name as the parent sees it (the host name unless a test sets it)."""

KINDS = ("json", "hb", "stack", "log", "error.json", "pid", "exit")
_RANK_FILE = re.compile(r"^rank-(\d+)\.(" + "|".join(re.escape(k) for k in KINDS) + r")$")


def rank_file(directory: Path, rank: int, kind: str) -> Path:
    """directory/rank-N.<kind>."""
    if kind not in KINDS:
        raise ValueError(f"not a rank file kind: {kind!r} (one of {', '.join(KINDS)})")
    return directory / f"rank-{rank}.{kind}"


def rank_of(name: str, kind: str) -> int | None:
    """The rank a file name says, when it is a rank file of that kind."""
    m = _RANK_FILE.match(name)
    return int(m.group(1)) if m and m.group(2) == kind else None


def scan(directory: Path, kind: str) -> dict[int, Path]:
    """rank -> its file of that kind; nothing when the directory is gone."""
    found: dict[int, Path] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return found
    for name in names:
        r = rank_of(name, kind)
        if r is not None:
            found[r] = directory / name
    return found
