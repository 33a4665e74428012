"""A rank's heartbeat and stack samples in the run directory: the records, their writers and readers, for both sides.

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


STACK_REQUEST = "stack.request"
"""The doctor writes a token here to ask every rank for its main thread's stack; each answers in rank-N.sample."""
SAMPLE_HEADER = "# ddp-doctor stack sample "
MAX_FRAMES = 256


def sample_path(run_dir: str, rank: int) -> str:
    return os.path.join(run_dir, f"rank-{rank}.sample")


def ask_for_stacks(run_dir: str, token: str) -> None:
    """Atomically: a rank reading the request never sees half a token."""
    target = os.path.join(run_dir, STACK_REQUEST)
    with open(target + ".tmp", "w") as f:
        f.write(token)
    os.replace(target + ".tmp", target)


def stack_text(token: str, ident: int | None, frame: object) -> str:
    """A thread's stack in faulthandler's layout (the doctor has one parser for both), newest frame first, tagged
    with the request it answers."""
    lines = [SAMPLE_HEADER + token, f"Current thread 0x{ident or 0:016x} (most recent call first):"]
    while frame is not None and len(lines) < MAX_FRAMES:
        code = frame.f_code  # type: ignore[attr-defined]
        lines.append(f'  File "{code.co_filename}", line {frame.f_lineno or 0} in {code.co_name}')  # type: ignore[attr-defined]
        frame = frame.f_back  # type: ignore[attr-defined]
    return "\n".join(lines) + "\n"


def read_sample(run_dir: str, rank: int, token: str) -> str | None:
    """The rank's stack sample answering `token`; None before it answered (or if it never will)."""
    try:
        with open(sample_path(run_dir, rank), encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    first, _, rest = text.partition("\n")
    return rest if first == SAMPLE_HEADER + token else None
