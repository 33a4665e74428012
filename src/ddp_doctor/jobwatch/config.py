"""The frozen configuration of one `ddp-doctor run`, built from the flags at the command boundary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddp_doctor.jobwatch.rhythm import RhythmConfig


@dataclass(frozen=True)
class WatchConfig:
    command: tuple[str, ...]
    """The user's launch command, exactly as given after `--`."""
    run_dir: Path
    """Where per-rank output, stacks, dumps, the GPU timeline and the report are kept."""
    hang_after_s: float | None = None
    """--hang-after: a fixed silence (no collective, no output) before the ranks are examined; None: learned."""
    hang_floor_s: float = 15.0
    """The learned threshold is max(hang_floor_s, hang_k x p95 of the intervals between progress events)."""
    hang_k: float = 5.0
    hang_start_s: float = 180.0
    """Before the job shows a rhythm (start-up, warm-up): the silence allowed."""
    on_hang: str = "report"
    """report: say so and keep waiting; kill: say so, then end the job."""
    stacks: str = "auto"
    """auto (py-spy, else the startup hook) | py-spy | hook (its thread, faulthandler as the last resort) | off."""
    hook: bool = True
    """The startup hook in the job's Python processes (output capture, faulthandler, error files)."""
    error_files: bool = True
    flight_recorder: bool = True
    nccl_debug: bool = True
    ras: bool = True
    """On a hang, ask NCCL's RAS (NCCL >= 2.24, in the job's processes) which peers are dead or missing."""
    sample_hz: float = 1.0
    """NVML timeline rate; 0 = off."""
    stack_sample_s: float = 1.0
    """How often every rank's stack is sampled for the straggler verdict; 0 = off."""
    live: bool = False
    """A live table of the ranks on stderr."""
    kill_grace_s: float = 10.0
    """After SIGTERM (hang kill, or a job still running after Ctrl-C), how long before SIGKILL."""
    node_rank: int = 0
    nnodes: int = 1
    gather: str | None = None
    """HOST:PORT where node 0 collects every node's evidence; None: this node only."""
    gather_timeout_s: float = 60.0

    def rhythm(self) -> RhythmConfig:
        return RhythmConfig(self.hang_floor_s, self.hang_k, self.hang_start_s, self.hang_after_s)
