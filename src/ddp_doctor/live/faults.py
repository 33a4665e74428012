"""The test-only fault switch: DDP_DOCTOR_FAULT makes one rank misbehave on purpose.

    DDP_DOCTOR_FAULT="rank=1,phase=collectives,action=kill"      (several: separate with ';')

Actions: kill (SIGKILL itself), hang (sleep until ended), raise (RuntimeError), exit (exit 3
without a word), never_start (sleep before its first heartbeat: a rank that never joins),
slow (each balance step takes `factor` (default 1.5) times longer: a straggler).
Used by the tests to prove that failures are named and nothing hangs; documented in
docs/live-chain.md as test-only. Never set it in production.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

ENV = "DDP_DOCTOR_FAULT"
ACTIONS = ("kill", "hang", "raise", "exit", "never_start", "slow")


@dataclass(frozen=True)
class Fault:
    rank: int
    phase: str
    action: str
    factor: float = 1.5


def parse(text: str | None) -> list[Fault]:
    faults: list[Fault] = []
    for item in (text or "").split(";"):
        if not item.strip():
            continue
        fields = dict(part.split("=", 1) for part in item.split(",") if "=" in part)
        action = fields.get("action", "")
        if action not in ACTIONS:
            raise ValueError(f"{ENV}: action {action!r} is not one of {', '.join(ACTIONS)}")
        faults.append(
            Fault(
                int(fields.get("rank", "0")), fields.get("phase", "start"), action, float(fields.get("factor", "1.5"))
            )
        )
    return faults


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


def trigger(faults: list[Fault], rank: int, phase: str) -> None:
    """Called at the start of every phase (and at "start", before the first heartbeat)."""
    for f in faults:
        if f.rank != rank:
            continue
        if f.action == "never_start" and phase == "start":
            _sleep_forever()
        if f.phase != phase or f.action in ("never_start", "slow"):
            continue
        if f.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif f.action == "hang":
            _sleep_forever()
        elif f.action == "raise":
            raise RuntimeError(f"injected fault: rank {rank} raises in phase {phase} ({ENV})")
        elif f.action == "exit":
            os._exit(3)


def slow_factor(faults: list[Fault], rank: int, phase: str) -> float:
    return next((f.factor for f in faults if f.rank == rank and f.phase == phase and f.action == "slow"), 1.0)
