"""The job's progress clock: when it last moved, read from the ranks' heartbeats and their output.

A move is a collective issued on any process group by any rank (hb-rank-N.json). Until the first
collective is seen (no hook, before init_process_group, a job without torch.distributed), a line of
output counts instead. Once collectives are seen, output no longer does: a job whose collectives
stopped while it keeps printing (a progress bar, a logging thread) is not progressing. The intervals
between moves are the rhythm the hang threshold is learned from (rhythm.py).
"""

from __future__ import annotations

from pathlib import Path

from ddp_doctor.jobwatch.hook import ddp_doctor_heartbeat as heartbeat
from ddp_doctor.jobwatch.rhythm import Rhythm, RhythmConfig, Threshold


class ProgressClock:
    def __init__(self, run_dir: Path, cfg: RhythmConfig, now: float) -> None:
        self.run_dir = str(run_dir)
        self.cfg = cfg
        self.rhythm = Rhythm(cfg)
        self.seqs: dict[tuple[int, int, str], int] = {}
        """(rank, pid, group) -> the last sequence number seen (a restarted worker is a new pid)."""
        self.collectives_seen = False
        self.last_move = now

    def poll(self, now: float, output_grew: bool) -> bool:
        """Read the heartbeats; True when the job moved since the last poll."""
        moved = False
        for beat in heartbeat.read_all(self.run_dir).values():
            for g in beat.groups:
                key = (beat.rank, beat.pid, g.name)
                if self.seqs.get(key) != g.seq:
                    self.seqs[key] = g.seq
                    moved = moved or g.seq > 0
        if moved and not self.collectives_seen:
            # The training loop's rhythm starts here: the start-up's output (imports, the launcher's banner)
            # says nothing about how often a step issues a collective.
            self.collectives_seen = True
            self.rhythm = Rhythm(self.cfg)
        counted = moved or (output_grew and not self.collectives_seen)
        if counted:
            self.rhythm.event(now)
            self.last_move = now
        return counted

    def silent(self) -> str:
        """What stopped, in words: 'collective' once the job has shown collectives, else 'output'."""
        return "collective" if self.collectives_seen else "output"

    def threshold(self, phases: dict[int, str]) -> Threshold:
        return self.rhythm.threshold(phases)
