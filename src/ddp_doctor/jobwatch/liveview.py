"""`--live`: one line per rank (pid, CPU, age of its last output) and per GPU, redrawn on stderr."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddp_doctor.jobwatch.supervise import Watcher


class LiveView:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=True)
        self.live = Live(
            console=self.console, refresh_per_second=1, transient=True, redirect_stdout=False, redirect_stderr=False
        )
        self.live.start()

    def update(self, w: Watcher) -> None:
        from rich.table import Table

        now = time.monotonic()
        table = Table(title=f"ddp-doctor run · {now - w.started:.0f} s", expand=False)
        for col in ("rank", "pid", "state", "last output"):
            table.add_column(col)
        ages = w.follow.rank_output_age(now)
        living = w.rank_pids()
        for r, rec in sorted(w.out.ranks.items()):
            age = ages.get(r)
            table.add_row(
                str(r),
                str(rec.get("pid")),
                "running" if r in living else "ended",
                f"{age:.0f} s ago" if age is not None else "none yet",
            )
        tl = w.out.timeline
        gpus: dict[int, dict[str, Any]] = tl.latest() if tl else {}
        for g, s in sorted(gpus.items()):
            table.add_row(f"GPU {g}", "", f"util {s.get('util_pct', '?')}%", f"mem {s.get('mem_used_mib', '?')} MiB")
        if tl is not None and tl.note:
            table.caption = tl.note
        self.live.update(table)

    def close(self) -> None:
        self.live.stop()
