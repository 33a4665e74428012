"""Is a quiet job hung? A pure judgement over what every rank was doing in two stack samples.

A rank *waits* when its main thread is inside torch.distributed (or in autograd without using the
CPU: DDP's all-reduce), or the flight recorder shows a collective it started and has not finished.
A rank is *busy* when it is not waiting and used CPU or moved between the two samples (compiling,
loading data, checkpointing). Hung: some rank waits and a rank it waits for is neither waiting nor
busy; or every rank waits and nothing moved; or a rank sits in a CUDA synchronisation point for the
whole window (stuck in GPU work). A rank that is busy with no collective pending is never hung.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from ddp_doctor import words
from ddp_doctor.jobwatch.collectives import Comparison
from ddp_doctor.jobwatch.stacks import Activity

BUSY_CPU_PER_S = 0.05
"""CPU seconds per second above which a rank counts as working (gloo waits and sleeps use ~0)."""


@dataclass(frozen=True)
class RankObs:
    rank: int
    activity: Activity
    same_stack: bool
    """The main thread's stack did not change between the two samples."""
    cpu_per_s: float
    """CPU of the rank and its children over the window, in cores."""
    pending: str | None = None
    """The collective the flight recorder shows as started and not completed (NCCL)."""
    last_seq: int | None = None
    """The highest collective sequence number this rank reached (flight recorder)."""
    last: str | None = None
    """That collective, e.g. 'gloo:all_reduce #5 (scheduled)'."""


class RankLook(TypedDict):
    """What one rank was doing when the job was judged (facts["run"]["hangs"][i]["states"])."""

    state: str
    """waiting | busy | idle"""
    activity: str
    doing: str
    where: str | None
    source: str | None
    cpu_cores: float
    same_stack: bool
    pending_collective: str | None
    last_collective: str | None


@dataclass(frozen=True)
class Judgement:
    verdict: str
    """hang | busy | moving."""
    kind: str = ""
    """collective | mismatch | cuda | stalled (for a hang)."""
    behind: tuple[int, ...] = ()
    message: str = ""
    states: dict[int, RankLook] = field(default_factory=dict)


def _waiting(o: RankObs) -> bool:
    if o.pending is not None:
        return True
    return o.activity.kind in ("collective", "init") or (o.activity.kind == "backward" and o.cpu_per_s < BUSY_CPU_PER_S)


WORK = ("compile", "data", "checkpoint", "import")
"""Activities that are progress even when the rank itself uses no CPU (it waits for its compiler, reader, disk)."""


def _busy(o: RankObs) -> bool:
    return not _waiting(o) and (o.cpu_per_s >= BUSY_CPU_PER_S or not o.same_stack or o.activity.kind in WORK)


def describe(o: RankObs) -> RankLook:
    f = o.activity.frame
    return RankLook(
        state="waiting" if _waiting(o) else "busy" if _busy(o) else "idle",
        activity=o.activity.kind,
        doing=o.activity.label,
        where=f.where() if f else None,
        source=f.source() if f else None,
        cpu_cores=round(o.cpu_per_s, 3),
        same_stack=o.same_stack,
        pending_collective=o.pending,
        last_collective=o.last,
    )


def _lag(o: RankObs, waiting: list[RankObs]) -> str:
    ahead = [w.last_seq for w in waiting if w.last_seq is not None]
    if o.last_seq is None or not ahead or o.last_seq >= max(ahead):
        return ""
    return f" (its last collective is {o.last}; the others reached #{max(ahead)})"


def _verb(ranks: list[RankObs]) -> str:
    return "waits" if len(ranks) == 1 else "wait"


def _names(ranks: list[int]) -> str:
    return words.ranks(ranks)


def judge(
    obs: list[RankObs],
    quiet_s: float,
    compared: Comparison | None = None,
    silent: str = "output",
    all_here: bool = False,
) -> Judgement:
    """silent: what stopped ('output', 'collective'); compared: the ranks' collectives side by side;
    all_here: every rank of the job runs on this node (no peer elsewhere to wait for)."""
    states = {o.rank: describe(o) for o in obs}
    if not obs:
        return Judgement("moving", message="no rank is running yet", states=states)
    waiting = [o for o in obs if _waiting(o)]
    others = [o for o in obs if not _waiting(o)]
    quiet = f"no {silent} for {quiet_s:.0f} s"
    if waiting and compared is not None and compared.verdict == "mismatch":
        # Ranks that entered different collectives under one sequence id wait for each other for ever,
        # whatever the others do: the mismatch is the cause, not a lag.
        return Judgement("hang", "mismatch", (), f"{quiet}: {compared.message()}", states)
    if waiting and others:
        return _some_wait(waiting, others, quiet, states)
    if waiting:
        return _all_wait(waiting, quiet, compared, all_here, states)
    return _none_waits(others, quiet, states)


def _cuda_stuck(others: list[RankObs]) -> list[RankObs]:
    return [o for o in others if o.activity.kind == "cuda" and o.same_stack]


def _some_wait(waiting: list[RankObs], others: list[RankObs], quiet: str, states: dict[int, RankLook]) -> Judgement:
    """Some ranks wait in a collective: the others are busy getting there, or never will."""
    busy = [o for o in others if _busy(o)]
    cuda = _cuda_stuck(others)
    in_what = sorted({o.pending or o.activity.label for o in waiting})
    idle = [o for o in others if o not in busy or o in cuda]
    if not idle:
        doing = "; ".join(f"rank {o.rank} {o.activity.label}" for o in busy)
        return Judgement(
            "busy",
            message=f"{quiet}, but not hung: {doing}; {_names([o.rank for o in waiting])} {_verb(waiting)} for it",
            states=states,
        )
    behind = tuple(o.rank for o in idle)
    doing = "; ".join(f"rank {o.rank} is {o.activity.label}" + _lag(o, waiting) for o in idle)
    kind = "cuda" if all(o in cuda for o in idle) else "collective"
    return Judgement(
        "hang",
        kind,
        behind,
        f"{quiet}: {_names([o.rank for o in waiting])} {_verb(waiting)}: {' / '.join(in_what)}; "
        f"{_names(list(behind))} never joined it: {doing}",
        states,
    )


def _all_wait(
    waiting: list[RankObs], quiet: str, compared: Comparison | None, all_here: bool, states: dict[int, RankLook]
) -> Judgement:
    """Every rank waits in a collective: the one behind, from the recorder or the sequence numbers."""
    if not all(o.same_stack for o in waiting):
        return Judgement("moving", message="ranks move between collectives", states=states)
    if compared is not None and compared.verdict == "lag":
        return Judgement(
            "hang",
            "collective",
            compared.behind,
            f"{quiet}: every rank waits in a collective; {compared.message()}",
            states,
        )
    seqs = {o.rank: o.last_seq for o in waiting if o.last_seq is not None}
    if len(seqs) >= 2 and min(seqs.values()) < max(seqs.values()):
        low = min(seqs.values())
        behind = tuple(r for r, s in seqs.items() if s == low)
        return Judgement(
            "hang",
            "collective",
            behind,
            f"{quiet}: every rank waits in a collective; {_names(list(behind))} {'lags' if len(behind) == 1 else 'lag'} behind at collective "
            f"#{low} while others completed #{max(seqs.values())} (flight recorder)",
            states,
        )
    return Judgement(
        "hang",
        "collective",
        (),
        f"{quiet}: every rank {'of the job' if all_here else 'on this node'} waits in "
        f"{' / '.join(sorted({o.activity.label for o in waiting}))}; "
        + (
            "none is behind: the ranks called different collectives, or one never completes"
            if all_here
            else "none is behind here: the missing peer is on another node, or the ranks called different collectives"
        ),
        states,
    )


def _none_waits(others: list[RankObs], quiet: str, states: dict[int, RankLook]) -> Judgement:
    """No rank waits in a collective: stuck in CUDA, busy, reading or writing, or stalled."""
    busy = [o for o in others if _busy(o)]
    cuda = _cuda_stuck(others)
    if cuda:
        behind = tuple(o.rank for o in cuda)
        return Judgement(
            "hang",
            "cuda",
            behind,
            f"{quiet}: {_names(list(behind))} stuck in CUDA work, not in a collective: "
            + "; ".join(f"rank {o.rank} {o.activity.label}" for o in cuda),
            states,
        )
    if busy:
        doing = "; ".join(f"rank {o.rank} {o.activity.label}" for o in busy)
        return Judgement("busy", message=f"{quiet}, but not hung (no collective pending): {doing}", states=states)
    io_bound = [o for o in others if o.activity.kind in ("data", "checkpoint", "compile")]
    if io_bound and len(io_bound) == len(others):
        doing = "; ".join(f"rank {o.rank} {o.activity.label}" for o in io_bound)
        return Judgement("busy", message=f"{quiet}, but not hung: {doing}", states=states)
    return Judgement(
        "hang",
        "stalled",
        tuple(o.rank for o in others),
        f"{quiet}: no rank used CPU or moved, none waits in a collective: "
        # The last collective a rank issued (the recorder's state: NCCL's 'scheduled' one never started) says
        # what the quiet rank left behind it, e.g. an all_reduce queued behind a kernel that never ends.
        + "; ".join(
            f"rank {o.rank} is {o.activity.label}" + (f" (its last collective: {o.last})" if o.last else "")
            for o in others
        ),
        states,
    )


def elsewhere(j: Judgement, all_ranks_here: bool) -> bool:
    """A hang with every rank here waiting and none of them behind, in a job with ranks on other nodes: the
    peer they wait for may be working there (rank 0 saving a checkpoint, a slower node), which this node
    cannot see. Under the learned threshold such a verdict waits for the start-up allowance of silence."""
    return j.verdict == "hang" and j.kind == "collective" and not j.behind and not all_ranks_here
