"""`--live`: one line per rank (pid, CPU, age of its last output) and per GPU, redrawn on stderr."""

from __future__ import annotations

from dataclasses import dataclass

from ddp_doctor.jobwatch.nvml import NvmlSample


@dataclass(frozen=True)
class RankLine:
    """One rank as the watcher last saw it."""

    rank: int
    pid: object
    running: bool
    output_age_s: float | None
    """Seconds since its log last grew; None before its first line."""


class LiveView:
    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=True)
        self.live = Live(
            console=self.console, refresh_per_second=1, transient=True, redirect_stdout=False, redirect_stderr=False
        )
        self.live.start()

    def update(self, elapsed_s: float, ranks: list[RankLine], gpus: dict[int, NvmlSample], note: str | None) -> None:
        """Redraw: the job's age, every rank, the latest NVML sample of every GPU, and the timeline's note."""
        from rich.table import Table

        table = Table(title=f"ddp-doctor run · {elapsed_s:.0f} s", expand=False)
        for col in ("rank", "pid", "state", "last output"):
            table.add_column(col)
        for line in ranks:
            age = line.output_age_s
            table.add_row(
                str(line.rank),
                str(line.pid),
                "running" if line.running else "ended",
                f"{age:.0f} s ago" if age is not None else "none yet",
            )
        for g, s in sorted(gpus.items()):
            table.add_row(f"GPU {g}", "", f"util {s.get('util_pct', '?')}%", f"mem {s.get('mem_used_mib', '?')} MiB")
        if note:
            table.caption = note
        self.live.update(table)

    def close(self) -> None:
        self.live.stop()
