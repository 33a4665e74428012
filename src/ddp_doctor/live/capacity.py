"""How many ranks this machine holds, checked before any rank starts.

One rank per GPU with NCCL and one per CPU core with gloo; `--oversubscribe` goes past that, but
never past what memory holds: each rank's memory is estimated from measured numbers
(knowledge/rank_memory.yaml) and the sum must fit in the memory available now (MemAvailable, or the
cgroup's limit when lower). A refusal is a UsageError naming the numbers and their source.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from ddp_doctor import knowledge
from ddp_doctor.errors import UsageError
from ddp_doctor.words import plural

MIB = 1 << 20
_CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Machine:
    cores: int
    cores_from: str
    """Where the number comes from, in words: 'CPU affinity', 'cgroup cpu.max'."""
    memory_bytes: int | None
    """Memory available to new processes now; None when it cannot be read."""
    memory_from: str

    @classmethod
    def here(cls) -> Machine:
        cores, cores_from = _cores()
        memory, memory_from = _memory()
        return cls(cores, cores_from, memory, memory_from)


@dataclass(frozen=True)
class RankMemory:
    """The estimate for one launch: per rank, plus the torchrun agent once per node."""

    per_rank_bytes: int
    agent_bytes: int
    how: str
    """The estimate in words, e.g. '300 MiB a rank + 2 DataLoader workers x 40 MiB + 32 MB batch x 5'."""


def _table() -> dict[str, float]:
    data = knowledge.load_mapping("rank_memory.yaml")
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}


def for_check(dataloader_workers: int, batch_mb: float) -> RankMemory:
    t = _table()
    batch_copies = 1 + t["batch_copies_per_worker"] * dataloader_workers
    per_rank = t["rank_mib"] + dataloader_workers * t["dataloader_worker_mib"] + batch_mb * batch_copies
    how = (
        f"{t['rank_mib']:g} MiB a rank + {plural(dataloader_workers, 'DataLoader worker')} x "
        f"{t['dataloader_worker_mib']:g} MiB + a {batch_mb:g} MB batch x {batch_copies:g}"
    )
    return RankMemory(int(per_rank * MIB), int(t["agent_mib"] * MIB), how)


def for_bench(max_bytes: int) -> RankMemory:
    t = _table()
    per_rank = t["rank_mib"] * MIB + t["bench_messages"] * max_bytes
    how = f"{t['rank_mib']:g} MiB a rank + {t['bench_messages']:g} messages of {max_bytes / MIB:g} MiB"
    return RankMemory(int(per_rank), int(t["agent_mib"] * MIB), how)


def refuse_beyond(
    nproc: int,
    backend: str,
    gpus: int,
    oversubscribe: bool,
    memory: RankMemory,
    machine: Machine | None = None,
) -> None:
    """A UsageError when `nproc` ranks of `backend` do not fit this machine."""
    here = machine or Machine.here()
    if not oversubscribe:
        if backend == "nccl" and nproc > gpus:
            raise UsageError(
                f"--nproc {nproc}: NCCL takes one GPU per rank and {plural(gpus, 'GPU is', 'GPUs are')} visible; "
                f"pass --nproc {max(gpus, 1)} or fewer (--oversubscribe to share GPUs anyway)"
            )
        if backend == "gloo" and nproc > here.cores:
            raise UsageError(
                f"--nproc {nproc}: {plural(here.cores, 'CPU core')} here ({here.cores_from}), and gloo ranks "
                f"past one per core share them and slow every phase; pass --nproc {here.cores} or fewer, "
                "or --oversubscribe to run them anyway"
            )
    need = memory.agent_bytes + nproc * memory.per_rank_bytes
    if here.memory_bytes is not None and need > here.memory_bytes:
        fit = max(0, (here.memory_bytes - memory.agent_bytes) // memory.per_rank_bytes)
        raise UsageError(
            f"--nproc {nproc} needs about {_gib(need)} of memory ({memory.how}, measured: "
            f"knowledge/rank_memory.yaml) and {_gib(here.memory_bytes)} is available ({here.memory_from}); "
            + (f"pass --nproc {fit} or fewer" if fit else "free memory first")
        )


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def _cores() -> tuple[int, str]:
    cores, where = len(os.sched_getaffinity(0)), "CPU affinity"
    quota = _cpu_quota()
    if quota is not None and quota < cores:
        cores, where = quota, "cgroup cpu.max"
    return max(cores, 1), where


def _cpu_quota() -> int | None:
    try:
        limit, period = (_own_cgroup() / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if limit == "max" else max(1, math.ceil(int(limit) / int(period)))


def _memory() -> tuple[int | None, str]:
    available: int | None = None
    where = "not known"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available, where = int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo"
                break
    except (OSError, ValueError):
        pass
    room = _cgroup_room()
    if room is not None and (available is None or room < available):
        available, where = room, "the cgroup's memory limit less its usage"
    return available, where


def _cgroup_room() -> int | None:
    return cgroup_room(_own_cgroup(), _own_cgroup("memory"))


def cgroup_room(v2: Path, v1_memory: Path) -> int | None:
    """The cgroup's memory limit less what it cannot give back: its usage counts the page cache, and
    the inactive file pages are reclaimed before anything is OOM-killed, so they are room (the working
    set as the kubelet computes it: usage - inactive_file; kubernetes.io/docs/concepts/scheduling-eviction/
    node-pressure-eviction, 'memory.available'). A check after a big read or build in the same container
    was refused for memory that the kernel hands back on demand."""
    places = (
        (v2, "memory.max", "memory.current", "inactive_file"),
        (v1_memory, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"),
    )
    for base, limit_name, usage_name, inactive_name in places:
        try:
            limit = (base / limit_name).read_text().strip()
            usage = int((base / usage_name).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 1 << 60:  # cgroup v1 writes a huge number for "no limit"
            return max(0, int(limit) - max(0, usage - _stat_value(base / "memory.stat", inactive_name)))
    return None


def _stat_value(path: Path, key: str) -> int:
    """One counter of a cgroup's memory.stat ('inactive_file 123'); 0 when it cannot be read."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _own_cgroup(controller: str = "") -> Path:
    """This process's cgroup directory: v2's ('0::/path'), or v1's of one controller
    ('4:memory:/path' -> /sys/fs/cgroup/memory/path); the cgroup root when that is unknown."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if (not controller and names == "") or controller in names.split(","):
                return _CGROUP / controller / path.lstrip("/")
    except (OSError, ValueError):
        pass
    return _CGROUP / controller
