"""Where this `ddp-doctor run` sits in a Slurm job, from the variables srun sets in every task.

Under `srun` (one task per node), node 0 of the step gathers every node's report and the others send
theirs, with no flags: the nodes are SLURM_STEP_NODELIST (the step may span fewer nodes than the job;
SLURM_JOB_NODELIST outside a step), this node's rank is its place in that list (SLURMD_NODENAME; else
SLURM_NODEID), node 0 is the list's first host. Slurm's environment variables: sbatch(1), srun(1)
"OUTPUT ENVIRONMENT VARIABLES".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

GATHER_PORT_BASE = 29600
GATHER_PORT_SPAN = 300
"""The gather port is GATHER_PORT_BASE + job id mod GATHER_PORT_SPAN: two jobs sharing a node rarely
collide, and it stays clear of torchrun's 29500."""


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list -> host names, as `scontrol show hostnames` prints them.

    node[01-03,7] -> node01 node02 node03 node7; rack[1-2]-gpu[1-2] -> rack1-gpu1 rack1-gpu2 rack2-gpu1 ...;
    a,b[3-4] -> a b3 b4. A range keeps the zero padding of its lower bound (Slurm's hostlist.c)."""
    hosts: list[str] = []
    for item in _split_top(text.strip()):
        hosts += _expand_one(item)
    return hosts


def _split_top(text: str) -> list[str]:
    """Split on the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in host list {text!r}")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced '[' in host list {text!r}")
    items.append(text[start:])
    return [i for i in items if i]


_BRACKET = re.compile(r"\[([^\]]*)\]")


def _expand_one(item: str) -> list[str]:
    m = _BRACKET.search(item)
    if m is None:
        return [item]
    head, tail = item[: m.start()], item[m.end() :]
    out = []
    for value in _range_values(m.group(1), item):
        out += [head + value + rest for rest in _expand_one(tail)]
    return out


def _range_values(body: str, item: str) -> list[str]:
    values: list[str] = []
    for part in body.split(","):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"host list {item!r}: {part!r} is not a number or a range N-M")
        if not sep:
            values.append(lo)
            continue
        if int(hi) < int(lo):
            raise ValueError(f"host list {item!r}: range {part!r} runs backwards")
        width = len(lo) if lo.startswith("0") else 0
        values += [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
    return values


@dataclass(frozen=True)
class SlurmPlacement:
    job_id: str
    step_id: str | None
    """None in the batch script itself (not under srun)."""
    nodes: tuple[str, ...]
    node_rank: int
    tasks: int
    """Tasks of the step (SLURM_NTASKS); one per node is what the gather needs."""
    restart: int = 0

    @property
    def nnodes(self) -> int:
        return len(self.nodes)

    @property
    def gathers(self) -> bool:
        """One doctor per node of a multi-node step: node 0 can gather. In the batch script only one
        doctor runs (on the first node); with several tasks per node each doctor watches one task."""
        return self.step_id is not None and self.nnodes > 1 and self.tasks == self.nnodes

    @property
    def gather(self) -> str:
        return f"{self.nodes[0]}:{GATHER_PORT_BASE + int(self.job_id) % GATHER_PORT_SPAN}"

    def facts(self) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "step_id": self.step_id,
            "nodes": list(self.nodes),
            "node_rank": self.node_rank,
            "tasks": self.tasks,
            "restart": self.restart,
            "gather": self.gather if self.gathers else None,
        }


def placement(env: Mapping[str, str]) -> SlurmPlacement | None:
    """None outside Slurm (no SLURM_JOB_ID) or when Slurm's variables do not fit together."""
    job_id = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job_id or not job_id.isdigit():
        return None
    step = env.get("SLURM_STEP_ID")
    listing = (env.get("SLURM_STEP_NODELIST") if step is not None else None) or env.get("SLURM_JOB_NODELIST")
    try:
        nodes = tuple(expand_hostlist(listing or ""))
    except ValueError:
        return None
    if not nodes:
        return None
    me = env.get("SLURMD_NODENAME")
    if me in nodes:
        rank = nodes.index(me)
    elif (env.get("SLURM_NODEID") or "").isdigit() and int(env["SLURM_NODEID"]) < len(nodes):
        rank = int(env["SLURM_NODEID"])
    else:
        return None
    tasks = env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or "1"
    restart = env.get("SLURM_RESTART_COUNT") or "0"
    return SlurmPlacement(
        job_id=job_id,
        step_id=step,
        nodes=nodes,
        node_rank=rank,
        tasks=int(tasks) if tasks.isdigit() else 1,
        restart=int(restart) if restart.isdigit() else 0,
    )
