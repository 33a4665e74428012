"""A rank's heartbeat in the run directory: the record, its writer and its reader, for both sides.

The startup hook imports this file by its own name (the hook's directory is first on the job's
PYTHONPATH, and the job's interpreter may not have ddp_doctor installed); the doctor imports it as
`ddp_doctor.jobwatch.hook.ddp_doctor_heartbeat`. So: the standard library only, and a name no user
module will have.

The heartbeat is each process group's collective sequence number: a counter torch keeps for gloo and
NCCL whether or not the flight recorder records (`ProcessGroup._get_sequence_number_for_group()`,
incremented when the rank issues a collective on that group). A healthy step moves it; a rank that
stopped issuing collectives leaves it where it is, whatever it prints.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

FILE_PATTERN = re.compile(r"^hb-rank-(\d+)\.json$")


@dataclass(frozen=True)
class GroupSeq:
    name: str
    """The process group's name in torch (`_world.pg_names`: '0' for the default group, '1', ...)."""
    desc: str
    """Its description ('default_pg', 'mesh_dp', ...); empty where this torch has none."""
    backend: str
    seq: int
    """Collectives this rank issued on the group."""


@dataclass(frozen=True)
class JobHeartbeat:
    rank: int
    pid: int
    time: float
    """Epoch seconds when the rank wrote it."""
    groups: tuple[GroupSeq, ...]

    def total(self) -> int:
        return sum(g.seq for g in self.groups)

    def default(self) -> GroupSeq | None:
        """The default process group ('0'), else the first one."""
        return next((g for g in self.groups if g.name == "0"), self.groups[0] if self.groups else None)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "rank": self.rank,
                "pid": self.pid,
                "time": self.time,
                "groups": [[g.name, g.desc, g.backend, g.seq] for g in self.groups],
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> JobHeartbeat | None:
        """None for anything that is not a heartbeat this module wrote (cut, corrupt, another shape)."""
        try:
            raw = json.loads(data)
            groups = tuple(GroupSeq(str(n), str(d), str(b), int(s)) for n, d, b, s in raw["groups"])
            return cls(int(raw["rank"]), int(raw["pid"]), float(raw["time"]), groups)
        except (ValueError, TypeError, KeyError):
            return None


def path(run_dir: str, rank: int) -> str:
    return os.path.join(run_dir, f"hb-rank-{rank}.json")


def write(run_dir: str, beat: JobHeartbeat) -> None:
    """Atomically (a reader never sees half a record)."""
    target = path(run_dir, beat.rank)
    with open(target + ".tmp", "wb") as f:
        f.write(beat.to_json())
    os.replace(target + ".tmp", target)


def read_all(run_dir: str) -> dict[int, JobHeartbeat]:
    """rank -> its latest heartbeat; files that do not parse are left out."""
    out: dict[int, JobHeartbeat] = {}
    try:
        names = os.listdir(run_dir)
    except OSError:
        return out
    for name in names:
        m = FILE_PATTERN.match(name)
        if not m:
            continue
        try:
            with open(os.path.join(run_dir, name), "rb") as f:
                beat = JobHeartbeat.from_json(f.read(1 << 20))
        except OSError:
            continue
        if beat is not None and beat.rank == int(m.group(1)):
            out[beat.rank] = beat
    return out


def of_this_process(dist: object, rank: int, pid: int, now: float) -> JobHeartbeat | None:
    """The heartbeat of the torch.distributed module `dist` in this process; None before init_process_group."""
    if not dist.is_initialized():  # type: ignore[attr-defined]
        return None
    world = dist.distributed_c10d._world  # type: ignore[attr-defined]
    groups = []
    # A copy: the job's main thread may create a group (new_group, a device mesh) while this runs.
    for pg, name in list(world.pg_names.items()):
        try:
            seq = int(pg._get_sequence_number_for_group())
        except Exception:  # noqa: BLE001, S112 - a group this torch cannot number (a fake or a destroyed one)
            continue
        backend = (world.pg_map.get(pg) or ("?",))[0]
        groups.append(GroupSeq(str(name), str(getattr(pg, "group_desc", "") or ""), str(backend), seq))
    return JobHeartbeat(rank, pid, now, tuple(sorted(groups, key=lambda g: (len(g.name), g.name))))
