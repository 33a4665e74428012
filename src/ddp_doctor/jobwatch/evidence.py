"""What the job leaves in the run directory, read back by the doctor while it runs and after.

rank-N.pid / .exit / .error.json / .stack / .log come from the startup hook; proc-PID.log is the
output of the job's other Python processes (the launcher's agent); fr-*.pickle are NCCL flight
recorder dumps; nccl.HOST.PID.log are NCCL's warnings.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddp_doctor.jobwatch import collectives
from ddp_doctor.jobwatch.hook import ddp_doctor_heartbeat as heartbeat
from ddp_doctor.rundir import layout

_STEP = re.compile(r"(?i)\b(?:global[_ ]step|step|iter(?:ation)?)\b\s*[:=#]?\s*\[?(\d+)")


@dataclass
class Followed:
    offset: int = 0
    last_growth: float = 0.0
    steps: list[tuple[float, int]] = field(default_factory=list)
    partial: str = ""


class LogFollower:
    """Reads what every rank-N.log / proc-PID.log gained since the last call; steps from the lines."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.files: dict[str, Followed] = {}
        self.last_output = time.monotonic()

    def poll(self, now: float) -> bool:
        """True when any log grew."""
        grew = False
        try:
            names = [n for n in os.listdir(self.run_dir) if n.endswith(".log") and n.startswith(("rank-", "proc-"))]
        except OSError:
            return False
        for name in names:
            state = self.files.setdefault(name, Followed(last_growth=now))
            try:
                size = os.stat(self.run_dir / name).st_size
            except OSError:
                continue
            if size <= state.offset:
                continue
            grew = True
            state.last_growth = now
            with open(self.run_dir / name, "rb") as f:
                f.seek(state.offset)
                data = f.read(size - state.offset)
            state.offset = size
            if name.startswith("rank-"):
                text = state.partial + data.decode("utf-8", "replace")
                lines = text.split("\n")
                state.partial = lines.pop()
                for line in lines:
                    m = _STEP.search(line)
                    if m:
                        state.steps.append((now, int(m.group(1))))
                        del state.steps[:-2000]
        if grew:
            self.last_output = now
        return grew

    def rank_output_age(self, now: float) -> dict[int, float]:
        out: dict[int, float] = {}
        for name, state in self.files.items():
            r = layout.rank_of(name, "log")
            if r is not None:
                out[r] = now - state.last_growth
        return out

    def steps(self) -> dict[int, list[tuple[float, int]]]:
        out: dict[int, list[tuple[float, int]]] = {}
        for name, state in self.files.items():
            r = layout.rank_of(name, "log")
            if r is not None and state.steps:
                out[r] = list(state.steps)
        return out


class _NoGlobals(pickle.Unpickler):
    """Flight-recorder dumps are plain dicts and lists; refuse anything that would run code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing {module}.{name} in a flight-recorder dump")


def read_flight_recorder(p: Path) -> dict[str, Any] | None:
    try:
        data = p.read_bytes()
        value = json.loads(data) if data[:1] == b"{" else _NoGlobals(io.BytesIO(data)).load()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError):
        return None
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class RecorderSummary:
    """How far one rank got in its collectives, as its flight-recorder dump (else its heartbeat) says."""

    file: str
    """The file it was read from (fr-rank-N.json, or hb-rank-N.json without a dump)."""
    entries: int
    """Recorder entries in the dump; 0 from a heartbeat."""
    last_seq: int | None
    """The highest collective sequence number the rank issued."""
    last: str | None
    """That collective: 'all_reduce #12 (completed)'."""
    pending: str | None
    """The first collective still started, not completed (NCCL marks them; gloo's stay scheduled)."""


def flight_recorder_summary(run_dir: Path) -> dict[int, RecorderSummary]:
    """rank -> how far it got, from its flight-recorder dump, else from its heartbeat's sequence number."""
    out: dict[int, RecorderSummary] = {}
    for p in sorted(run_dir.glob("fr-*rank-*")):
        if p.name.endswith(".tmp"):
            continue
        m = re.search(r"rank-(\d+)", p.name)
        dump = read_flight_recorder(p)
        if not m or dump is None:
            continue
        entries = [e for e in dump.get("entries") or [] if isinstance(e, dict)]
        seqs = [int(e.get("collective_seq_id") or 0) for e in entries]
        last = entries[seqs.index(max(seqs))] if seqs else None
        # NCCL marks entries started / completed; gloo's stay "scheduled", so only the sequence number counts there.
        started = [e for e in entries if e.get("state") == "started"]
        out[int(m.group(1))] = RecorderSummary(
            file=p.name,
            entries=len(entries),
            last_seq=max(seqs) if seqs else None,
            last=f"{last.get('profiling_name', '?')} #{last.get('collective_seq_id')} ({last.get('state')})"
            if last
            else None,
            pending=f"{started[0].get('profiling_name', '?')} #{started[0].get('collective_seq_id')}"
            if started
            else None,
        )
    # Without recorder entries (--no-flight-recorder, TORCH_FR_BUFFER_SIZE=0, torch < 2.6 unset), the process
    # group's own sequence number still says how far each rank got.
    for r, group in read_seq_numbers(run_dir).items():
        known = out.get(r)
        if known is None or known.last_seq is None:
            backend = group.backend
            said = f"{backend} collective #{group.seq} (process group sequence number)"
            out[r] = RecorderSummary(f"hb-rank-{r}.json", 0, group.seq, said, None)
    return out


def read_seq_numbers(run_dir: Path) -> dict[int, heartbeat.GroupSeq]:
    """rank -> the default group of its heartbeat (its sequence number and backend)."""
    out: dict[int, heartbeat.GroupSeq] = {}
    for r, beat in heartbeat.read_all(str(run_dir)).items():
        group = beat.default()
        if group is not None:
            out[r] = group
    return out


def collective_records(
    run_dir: Path, ranks: dict[int, bool], recorder_on: bool
) -> tuple[dict[int, collectives.RankRecord], list[collectives.Missing]]:
    """Every rank's collectives for the comparison across ranks, and the ranks whose dump is missing, with why.

    ranks: rank -> whether its process was still alive when the dumps were asked for."""
    beats = heartbeat.read_all(str(run_dir))
    dumps: dict[int, Path] = {}
    # The doctor's request (fr-rank-N.json) first, else the watchdog's own dump on a timeout (fr-timeout-rank-N).
    for p in sorted(run_dir.glob("fr-*rank-*"), key=lambda p: not p.name.startswith("fr-timeout-")):
        m = re.fullmatch(r"fr-(?:timeout-)?rank-(\d+)(?:\.json|\.pickle)?", p.name)
        if m:
            dumps[int(m.group(1))] = p
    records: dict[int, collectives.RankRecord] = {}
    missing: list[collectives.Missing] = []
    for r in sorted(set(ranks) | set(beats) | set(dumps)):
        beat = beats.get(r)
        seqs = {g.name: g.seq for g in beat.groups} if beat else None
        calls: tuple[collectives.Call, ...] = ()
        if r in dumps:
            dump = read_flight_recorder(dumps[r])
            if dump is None:
                missing.append(collectives.Missing(r, f"{dumps[r].name} does not parse (cut short or corrupt)"))
            else:
                calls = collectives.calls_of_dump(r, dump)
                if not calls:
                    missing.append(
                        collectives.Missing(r, f"{dumps[r].name} holds no collectives (TORCH_FR_BUFFER_SIZE=0?)")
                    )
        elif recorder_on:
            missing.append(collectives.Missing(r, _why_no_dump(r, ranks.get(r, False), beat is not None)))
        if calls or seqs is not None:
            records[r] = collectives.RankRecord(r, calls, seqs)
    return records, missing


def _why_no_dump(rank: int, alive: bool, has_heartbeat: bool) -> str:
    if not alive:
        return "no flight-recorder dump: its process had ended before the dumps were asked for"
    if has_heartbeat:
        return (
            "no flight-recorder dump: it answered with its sequence numbers but its recorder gave nothing "
            "(recording off in this process, or a torch without a dump function)"
        )
    return (
        "no flight-recorder dump and no heartbeat: it did not answer the request (its Python is blocked, e.g. C code "
        "holding the GIL, or it never called init_process_group)"
    )
