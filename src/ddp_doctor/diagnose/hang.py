"""Read a log that just stops: where it stopped, which rank printed what last, and what to try.

Only the tail of the log is read (blockscan.Tail). The log is a hang when its last line that is
not launcher chatter belongs to NCCL / process-group initialisation or to a collective, and
nothing failed: every rank is then waiting for a peer. The stage picks the ranked hypotheses of
diag.hang in catalogue.yaml.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ddp_doctor.diagnose.catalogue import Signature
from ddp_doctor.diagnose.lines import NCCL_COMM, Origin, clean, origin
from ddp_doctor.diagnose.readers import Knowledge
from ddp_doctor.report import Evidence, Result, Status

STAGE_OF = {
    "init_start": "init",
    "init": "init",
    "init_done": "after_init",
    "collective": "collective",
    "extension_wait": "extension_build",
    "p2p_test": "p2p_test",
    "ray_train_start": "ray_train_start",
}
STAGE_WORDS = {
    "extension_build": "where torch waits to build or load a C++/CUDA extension (its build directory's lock)",
    "p2p_test": "inside the tables of CUDA's p2pBandwidthLatencyTest, before its closing note",
    "ray_train_start": "where Ray Train starts its workers, before any worker printed a line",
    "init": "during NCCL / process-group initialisation",
    "startup": "during NCCL's start-up lines (before any communicator was set up)",
    "after_init": "right after NCCL initialisation completed, before any collective finished",
    "collective": "inside a collective",
}
MAX_RANKS_SHOWN = 16
MIN_ACTIVITY = 2
"""Distributed lines the tail must hold before its end is read as a hang: one stray NCCL line is not a job."""


@dataclass(frozen=True)
class Last:
    lineno: int
    text: str
    kind: str
    """finished | init_done | collective | init | other"""
    seq: int | None = None
    op: str | None = None


def classify(k: Knowledge, text: str) -> str | None:
    """The activity class of a line; None for launcher chatter (it says nothing about the ranks)."""
    if not text.strip():
        return None
    finished = k.classes[0][1]  # the launcher's own "finished" lines outrank its chatter
    if any(p.search(text) for p in finished):
        return "finished"
    if any(p.search(text) for p in k.chatter):
        return None
    for name, patterns in k.classes[1:]:
        if any(p.search(text) for p in patterns):
            return name
    return "other"


def _sequence(k: Knowledge, text: str) -> tuple[int | None, str | None]:
    for p in k.sequence:
        m = p.search(text)
        if m:
            g = m.groupdict()
            seq = int(g["seq"]) if g.get("seq") else int(g["hex"], 16) if g.get("hex") else None
            return seq, g.get("op")
    return None, None


def _who(where: Origin, pid_rank: dict[tuple[str | None, int], int]) -> str:
    if where.rank is not None:
        return f"rank {where.rank}"
    if where.pid is not None and (where.node, where.pid) in pid_rank:
        return f"rank {pid_rank[(where.node, where.pid)]}"
    if where.local_rank is not None:
        return f"{where.node + ' ' if where.node else ''}local rank {where.local_rank}"
    if where.node and where.gpu is not None:
        return f"{where.node} gpu {where.gpu}"
    return "unattributed"


@dataclass
class _Scan:
    """What the log's tail says, line by line: the last meaningful line of each process and in all."""

    last: Last | None = None
    per_who: dict[str, Last] = field(default_factory=dict)
    last_coll: dict[str, Last] = field(default_factory=dict)
    n_ranks: int = 0
    claims: dict[int, int] = field(default_factory=dict)
    """rank -> how many processes announced it."""
    activity: int = 0
    past_startup: bool = False
    """A communicator was being set up: more than the lines every rank prints first."""
    self_checking: bool = False
    """A test that prints a row per completed step announced itself (nccl-tests)."""
    lock_named: bool = False
    """A line said a C++ extension's build lock file is already there."""
    p2p_test: bool = False
    """CUDA's p2pBandwidthLatencyTest announced itself: its table lines are its progress."""
    file_init: bool = False
    """A file:// init method was named: a rendezvous file left by an earlier run may be what the ranks wait on."""


def _scan(k: Knowledge, tail: list[tuple[int, str]], pid_rank: dict[tuple[str | None, int], int]) -> _Scan:
    seen = _Scan()
    for lineno, raw in tail:
        text = clean(raw)
        banner = any(p.search(text) for p in k.self_checking)
        seen.self_checking = seen.self_checking or banner
        seen.activity += banner  # the test's own start counts as distributed activity
        seen.p2p_test = seen.p2p_test or any(p.search(text) for p in k.p2p_banner)
        seen.file_init = seen.file_init or any(p.search(text) for p in k.file_init)
        if any(p.search(text) for p in k.distributed_start):
            seen.activity = max(seen.activity, MIN_ACTIVITY - 1)  # this line's own class adds the last one
        kind = classify(k, text)
        if kind == "p2p_test" and not seen.p2p_test:
            kind = "other"  # a line of numbers is the test's matrix only after its banner
        if kind is None:
            continue
        if kind == "extension_wait" and any(p.search(text) for p in k.extension_lock):
            seen.lock_named = True
        comm = NCCL_COMM.search(text) or _COMM_DONE.search(text)
        where = origin(text)
        if comm and where.pid is not None:
            pid_rank.setdefault((where.node, where.pid), int(comm.group("rank")))
        m = _NRANKS.search(text)
        if m:
            seen.n_ranks = max(seen.n_ranks, int(m.group(1)))
        for p in k.announce:
            a = p.search(text)
            if a:
                seen.claims[int(a.group("rank"))] = seen.claims.get(int(a.group("rank")), 0) + 1
                seen.n_ranks = max(seen.n_ranks, int(a.group("world")))
                if int(a.group("world")) > 1:  # a rank naming its world of several is a distributed job by itself
                    seen.activity = max(seen.activity, MIN_ACTIVITY)
                if where.rank is None:
                    where = Origin(rank=int(a.group("rank")), node=where.node)
        seq, op = _sequence(k, text) if kind == "collective" else (None, None)
        seen.activity += kind in STAGE_OF
        seen.past_startup = seen.past_startup or kind in ("init", "init_done", "collective")
        last = Last(lineno, text, kind, seq, op)
        who = _who(where, pid_rank)
        seen.per_who[who] = last
        if kind == "collective":
            seen.last_coll[who] = last
        seen.last = last
    return seen


def read(
    k: Knowledge,
    sig: Signature,
    source: str,
    tail: list[tuple[int, str]],
    pid_rank: dict[tuple[str | None, int], int],
) -> Result | None:
    seen = _scan(k, tail, pid_rank)
    last_meaningful, per_who, last_coll = seen.last, seen.per_who, seen.last_coll
    if last_meaningful is None or last_meaningful.kind == "finished" or seen.activity < MIN_ACTIVITY:
        return None
    if last_meaningful.kind in STAGE_OF:
        stage = STAGE_OF[last_meaningful.kind]
        if stage == "init" and seen.file_init:
            stage_hyps = sig.hypotheses.get("init_file_url", ())
            sig = replace(
                sig,
                hypotheses={
                    **sig.hypotheses,
                    "init": stage_hyps + tuple(h for h in sig.hypotheses.get("init", ()) if h not in stage_hyps),
                },
            )
        waited = NOT_NCCL.get(stage)
        if waited is not None and waited.closing:
            sig = replace(sig, remedy=waited.closing)
        result = _result(sig, source, stage, last_meaningful, per_who, last_coll, seen.n_ranks, len(tail))
        return _stopped(result, seen, last_meaningful)
    waiting = _waiting_in_collective(per_who, last_coll)
    if waiting is not None:  # a lagging rank printed after the others entered a collective it never entered
        return _result(sig, source, "collective", waiting, per_who, last_coll, seen.n_ranks, len(tail))
    return None


@dataclass(frozen=True)
class Waited:
    """A stage that is not NCCL's: what the log shows waiting there, and what a hang there means."""

    title: str
    cause: str
    if_stopped: str
    """The summary's words for 'if the job stopped there'."""
    closing: str = ""
    """What to do after the ranked hypotheses, where diag.hang's own advice (py-spy on the ranks, a collective
    timeout) does not fit the stage."""


NOT_NCCL = {
    "extension_build": Waited(
        "The log stops where torch waits for a C++/CUDA extension's build lock, with no error (a hang)",
        "torch.utils.cpp_extension builds a JIT extension (DeepSpeed's ops, NVlabs' plugins, custom CUDA ops) under "
        "a lock file in its build directory: one process builds, the others wait until the lock file is gone, and "
        "each prints right away that it builds, skips the build or loads the module. A log whose processes stop "
        "after naming the extensions root waits on that lock, forever when the process that made it died mid-build.",
        "its processes wait on a build lock",
    ),
    "p2p_test": Waited(
        "The log stops inside CUDA's p2pBandwidthLatencyTest, with no error (a GPU-to-GPU copy that never finished?)",
        "p2pBandwidthLatencyTest (CUDA samples) copies between every pair of GPUs, with peer-to-peer off and then on, "
        "prints each matrix row as soon as it is measured and ends with a note. Output that stops inside its "
        "tables stopped at a copy between two GPUs: on bare metal and VMs that is GPU peer-to-peer traffic dropped "
        "by the IOMMU or PCIe ACS (the copy never completes), unless the paste was only cut there.",
        "a copy between two GPUs never finished (peer-to-peer blocked by the IOMMU or PCIe ACS)",
    ),
    "ray_train_start": Waited(
        "The log stops while Ray Train starts its workers, with no error (workers waiting for GPUs or CPUs?)",
        "Ray Train reserves one bundle of resources per worker (num_workers bundles of 1 CPU, and 1 GPU each with "
        "use_gpu=True, or resources_per_worker) in a placement group before any worker exists, and each worker prints "
        "as soon as it starts ('Setting up process group for: env://', 'Started training worker group'). Output "
        "that stops right after the trainer announced itself waits for that placement group: resources the Ray "
        "cluster does not have are waited for until Ray Train's timeout, where its release has one, or forever.",
        "its workers wait for resources the Ray cluster cannot give them (more GPU workers than GPUs?)",
        "Run the experiments above in order; the first that changes the outcome names the cause. While it waits, "
        "`ray status` shows the pending demand; in the releases that have them, TRAIN_PLACEMENT_GROUP_TIMEOUT_S "
        "(BackendExecutor's placement group) or RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S (Ray Train v2, which then "
        "retries) bound the wait.",
    ),
}


def _stopped(result: Result, seen: _Scan, last_meaningful: Last) -> Result:
    """The log ends at a stage: a hang, or a paste that ends there (then said as a warning)."""
    waited = NOT_NCCL.get(str(result.observed.get("stage")))
    if waited is not None:
        result = replace(result, title=waited.title, cause=waited.cause)
        if seen.lock_named and result.observed.get("stage") == "extension_build":
            # the lock was there before the wait began, and nothing came after it
            result.summary += "; the lock file was already there when the build began"
            return result
        return replace(
            result,
            status=Status.WARN,
            summary=result.summary.replace(
                "the job hung there",
                f"if it stopped there, {waited.if_stopped}; if the paste only ends there, its end says more",
            ),
        )
    if seen.self_checking and last_meaningful.kind == "collective":
        # nccl-tests prints its table's header once its communicators are set up, then a row for every message
        # size as soon as its collective completes: output that stops at the header waited in the first
        # collective. Output that stops while the communicators are set up is read as any job's (below): a
        # paste of a run's first lines, cut there, shows the same lines as a run that stopped there.
        result.summary += "; nccl-tests printed no result row after it, so its first collective never completed"
        return result
    doubled = sorted(r for r, n in seen.claims.items() if n > 1)
    if doubled:
        result.summary += (
            f"; {'rank' if len(doubled) == 1 else 'ranks'} {_ranges(doubled)} {'was' if len(doubled) == 1 else 'were each'} announced by more than one process: the processes of "
            "different nodes computed the same global ranks (node rank / tasks per node disagree with the launcher), "
            f"so ranks {_ranges(result.observed['ranks_missing'])} never exist"
            if result.observed.get("ranks_missing")
            else "; some ranks were announced by more than one process"
        )
        result.observed["ranks_announced_twice"] = doubled
    if seen.past_startup and not _ranks_disagree(result, seen.per_who) and not doubled:
        # Every rank seen stopped at the same kind of line and none is missing: a hang, or a paste
        # that ends there. Say what a hang would mean, as a warning.
        return replace(
            result,
            status=Status.WARN,
            summary=result.summary.replace(
                "the job hung there",
                "if the job stopped there it hung; if the paste only ends there, its end says more",
            ),
        )
    if not seen.past_startup:
        # Only the first lines every rank prints: a hang in bootstrap, or a paste that stops early.
        return replace(
            result,
            status=Status.WARN,
            summary=f"the log ends {STAGE_WORDS['startup']} (line {last_meaningful.lineno}) with no error: "
            "if the job stopped there, it hung in NCCL's bootstrap; if this is only the beginning of the log, "
            "the end of it says more",
        )
    return result


def _ranks_disagree(result: Result, per_who: dict[str, Last]) -> bool:
    """Strong signs of a hang: ranks at different collectives, at different stages, or ranks missing."""
    if result.observed.get("ranks_missing") or "never entered" in result.summary or "never printed" in result.summary:
        return True
    kinds = {last.kind for who, last in per_who.items() if who != "unattributed" and last.kind in STAGE_OF}
    return len(kinds) > 1


def _waiting_in_collective(per_who: dict[str, Last], last_coll: dict[str, Last]) -> Last | None:
    seqs = {who: last.seq for who, last in last_coll.items() if last.seq is not None}
    if len(seqs) < 2 or len(set(seqs.values())) < 2:
        return None
    top = max(seqs.values())
    waiting = [per_who[w] for w, s in seqs.items() if s == top and per_who[w].kind == "collective"]
    return max(waiting, key=lambda last: last.lineno) if waiting else None


def _result(
    sig: Signature,
    source: str,
    stage: str,
    final: Last,
    per_who: dict[str, Last],
    last_coll: dict[str, Last],
    n_ranks: int,
    tail_lines: int,
) -> Result:
    ranks = sorted(per_who, key=_order_key)
    lines = [f"{who}: line {last.lineno} ({last.kind}) {_short(last.text)}" for who, last in per_who.items()]
    lines.sort(key=lambda s: _order_key(s.split(":", 1)[0]))
    behind = _behind(last_coll)
    seen = {int(w.split()[1]) for w in ranks if w.startswith("rank ")}
    # only when lines are attributed to ranks at all can a rank be said to be missing
    missing = sorted(set(range(n_ranks)) - seen) if n_ranks and seen else []
    summary = f"the log ends {STAGE_WORDS[stage]} (line {final.lineno}) with no error after it: the job hung there"
    if behind:
        summary += f"; {behind}"
    if missing:
        summary += f"; no line of {'rank' if len(missing) == 1 else 'ranks'} {_ranges(missing)} of {n_ranks} in the last {tail_lines} lines"
    hypotheses = sig.hypotheses.get(stage, ())
    ranked = "\n".join(f"  {i}. {h.cause}\n     test: {h.test}" for i, h in enumerate(hypotheses, 1))
    remedy = f"Likely causes, most likely first:\n{ranked}\n{sig.remedy}" if ranked else sig.remedy
    evidence = [
        Evidence(
            f"{source} [{who}]" if who != "unattributed" else source,
            _short(per_who[who].text, 300),
            per_who[who].lineno,
        )
        for who in ranks[:MAX_RANKS_SHOWN]
    ]
    return Result(
        id=sig.id,
        title=sig.title,
        status=sig.severity,
        summary=summary,
        cause=sig.cause,
        remedy=remedy,
        observed={
            "stage": stage,
            "last_line": final.lineno,
            "last_by_rank": {
                who: {"line": last.lineno, "kind": last.kind, "text": _short(last.text, 200)}
                for who, last in per_who.items()
            },
            "ranks_missing": missing,
            "hypotheses": [{"cause": h.cause, "test": h.test} for h in hypotheses],
        },
        evidence=evidence,
    )


def _behind(last_coll: dict[str, Last]) -> str:
    seqs = {who: last.seq for who, last in last_coll.items() if last.seq is not None}
    if len(seqs) < 2 or len(set(seqs.values())) < 2:
        if len(last_coll) == 1:
            ((who, last),) = last_coll.items()
            op = f" {last.op}" if last.op else ""
            return f"only {who} printed a last collective ({op.strip() or 'collective'} #{last.seq}); the other ranks never printed it"
        return ""
    top = max(seqs.values())
    lagging = sorted((w for w, s in seqs.items() if s < top), key=_order_key)
    waiting = sorted((w for w, s in seqs.items() if s == top), key=_order_key)
    op = next((last_coll[w].op for w in waiting if last_coll[w].op), None) or "collective"
    verb = "waits" if len(waiting) == 1 else "wait"
    return f"{', '.join(waiting)} {verb} in {op} #{top}, which {', '.join(lagging)} never entered"


_NRANKS = re.compile(r"\bn[Rr]anks[ =](\d+)")
# "comm 0x.. rank 4 nranks 16 cudaDev 4 busId 85000 - Init COMPLETE": also says which pid is which rank
_COMM_DONE = re.compile(r"comm 0x[0-9a-f]+ rank (?P<rank>\d+) nranks \d+")


def _order_key(who: str) -> tuple[int, int, str]:
    parts = who.split()
    if parts[0] == "rank" and len(parts) > 1 and parts[1].isdigit():
        return (0, int(parts[1]), who)
    return (1, 0, who)


def _ranges(nums: list[int]) -> str:
    out, start, prev = [], nums[0], nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def _short(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
