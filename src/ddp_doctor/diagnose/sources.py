"""Which rank a log file belongs to, from its name: lines without a prefix of their own take it.

The layouts users have (each pattern is searched in the file's path relative to what they passed):
  attempt_0/3/stderr.log     torchrun --log-dir DIR (--redirects / --tee): DIR/RUN_ID/attempt_N/LOCAL_RANK/
                             {stdout,stderr}.log  (torch/distributed/elastic/multiprocessing/api.py)
  rank-3.log, rank-3.error.json   a `ddp-doctor run` directory (jobwatch/evidence.py)
  train_rank3.out, log.rank_3     names people give per-rank logs
  slurm-123_3.out, task-3.err     Slurm's per-task files (srun -o 'x_%t.out': %t is the task id, the rank
                             when srun starts one process per rank; https://slurm.schedmd.com/srun.html#SECTION_FILENAME-PATTERN)
When several files differ only in one number (worker-0.log, worker-1.log ... from `kubectl logs` of each pod),
that number names the file: a pod or task, kept as the file's node label, not a rank.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddp_doctor.diagnose.lines import Origin

_RANKED = (
    re.compile(r"(?:^|/)attempt_\d+/(?P<local>\d+)/(?:stdout|stderr|error)\.(?:log|json)$"),
    # A `ddp-doctor run` directory names every other Python process of the job by its pid (the launcher,
    # jobwatch/hook/sitecustomize.py): proc-4242.log is process 4242, never rank 4242.
    re.compile(r"(?:^|/)proc-(?P<pid>\d+)\.log$"),
    re.compile(r"(?:^|[/_.\-])rank[-_]?(?P<rank>\d+)(?=[/_.\-]|$)", re.IGNORECASE),
    re.compile(r"(?:^|[/_.\-])(?:task|proc|process)[-_]?(?P<rank>\d+)(?=[/_.\-]|$)", re.IGNORECASE),
)


def origin_of(path: str) -> Origin | None:
    """The rank (or local rank) a file's path names, if it names one."""
    path = path.replace("\\", "/")
    for pattern in _RANKED:
        m = pattern.search(path)
        if m is None:
            continue
        g = m.groupdict()
        if g.get("local") is not None:
            return Origin(local_rank=int(g["local"]))
        if g.get("pid") is not None:
            return Origin(pid=int(g["pid"]))
        return Origin(rank=int(g["rank"]))
    return None


_NUMBER = re.compile(r"\d+")


def origins(paths: Sequence[str]) -> dict[str, Origin | None]:
    """Each path's origin: from its own name, or, for files that differ only in one number (one per pod or
    task), that number as the file's label."""
    out = {p: origin_of(p) for p in paths}
    rest = [p for p in paths if out[p] is None]
    if len(rest) < 2:
        return out
    shapes: dict[str, list[str]] = {}
    for p in rest:
        shapes.setdefault(_NUMBER.sub("#", p), []).append(p)
    for shape, group in shapes.items():
        if len(group) < 2 or shape.count("#") == 0:
            continue
        numbers = [_NUMBER.findall(p) for p in group]
        varying = [i for i in range(len(numbers[0])) if len({n[i] for n in numbers}) > 1]
        if len(varying) != 1:
            continue
        at = varying[0]
        for p, n in zip(group, numbers, strict=True):
            if shape.rstrip("/").endswith(("_#.out", "_#.err", "-#.out", "-#.err", ".#.out", ".#.err")):
                out[p] = Origin(rank=int(n[at]))  # Slurm's %t: one file per task
            else:
                out[p] = Origin(node=p.rsplit("/", 1)[-1].rsplit(".", 1)[0])
    return out
