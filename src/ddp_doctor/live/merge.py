"""Rank payloads + the run's outcome -> Results, facts and the root cause. No torch here.

Root cause: the earliest failure in time among the *primary* ones. A failure is secondary
when the rank itself says which ranks it waited for (`blame_ranks`), when its error is the
typical echo of a peer's death (connection reset/closed by peer), or when torchrun ended the
rank after another one failed. A rank that hung or never started is primary even though it
wrote nothing: its heartbeat (or the lack of one) and its peers' blame say so.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from ddp_doctor import resultids
from ddp_doctor.diagnose import diagnose
from ddp_doctor.live import nccl_log
from ddp_doctor.live.launch import RunOutcome
from ddp_doctor.render.folding import fold_summaries
from ddp_doctor.report import Evidence, Result, Status
from ddp_doctor.rundir import layout
from ddp_doctor.rundir.records import CheckRecord, PhaseErrorRecord, PhaseRecord, RankResult
from ddp_doctor.words import all_of, plural, ranks

PHASE_TITLES = {
    "init": "torchrun ranks join and init_process_group",
    "collectives": "collectives give exact results",
    "dataloader": "DataLoader workers through /dev/shm",
    "sampler": "DistributedSampler shards",
    "ddp": "DDP training stays in sync",
    "balance": "every rank carries the same load",
    "gpu_health": "GPU health micro-benchmarks",
}
# Errors that a rank sees when a *peer* died or hung: secondary, never the root cause.
_PEER_ECHO = re.compile(
    r"Connection (?:reset|closed) by peer|Broken pipe|remote worker|NCCL communicator was aborted|"
    r"ranks joined within|Socket Timeout|recvValue failed|Connection refused",
    re.IGNORECASE,
)


@dataclass
class Plan:
    """What the run was asked to be, for judging what came back."""

    backend: str
    nproc: int
    world_size: int | None
    """None with elastic --nnodes MIN:MAX."""
    nnodes: str
    phases: list[str]
    timeout_s: float
    node: str
    ib_present: bool = False
    ranks: set[int] | None = None
    """Multi-node (live/multinode): the ranks known to this node; others ran elsewhere. None: 0..world-1."""


class PhaseTime(TypedDict):
    name: str
    started: float | None
    duration_s: float | None
    status: str


class BeatFacts(TypedDict):
    phase: str
    step: str | None
    time: float


class RootFacts(TypedDict):
    id: str
    rank: int | None
    node: str | None
    phase: str | None
    summary: str


class LiveFacts(TypedDict):
    """The report's facts.live as the ranks and the run's outcome tell it (the chain adds the launcher's)."""

    backend: str
    world_size: int
    nnodes: str
    nproc_per_node: int
    ranks_joined: int
    phases: dict[int, dict[str, str]]
    """rank -> phase -> its status."""
    phase_times: dict[int, list[PhaseTime]]
    """Per-rank phase start and duration: the HTML report draws them as a timeline per rank."""
    heartbeats: dict[int, BeatFacts]
    devices: dict[int, object]
    """rank -> its device, as the init phase reported it."""
    exit_codes: dict[str, int]
    root_cause: RootFacts | None


@dataclass
class Merged:
    results: list[Result]
    root: Result | None
    torch_facts: Mapping[str, Any] | None
    """Rank 0's torch facts (its init phase's), which stand above the parent's file-based ones."""
    live_facts: LiveFacts


def _signal_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name} ({code})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def first_failure(found: list[Result]) -> Result | None:
    """The diagnosis that explains a failure: the first one with status fail. A warning (e.g. diag.sigterm,
    a consequence of another rank's failure) must never lend its cause or remedy to a failing phase."""
    return next((d for d in found if d.status is Status.FAIL), None)


def _evidence_from(lines: list[str], source: str, limit: int = 8) -> list[Evidence]:
    picked = [(i, ln) for i, ln in enumerate(lines, 1) if ln.strip()][-limit:]
    return [Evidence(source, ln[:500], i) for i, ln in picked]


def _apply_diagnosis(result: Result, rank: int, outcome: RunOutcome, extra: list[str]) -> None:
    """cause + remedy from the diagnosis catalogue, over this rank's error, log and exit status."""
    log = outcome.logs.get(f"rank-{rank}.log", [])
    sources = {f"rank-{rank}.error": extra, f"rank-{rank}.log": log}
    codes = {k: v for k, v in outcome.exit_codes.items() if k == f"rank {rank}"}
    found = diagnose(sources, codes)
    if found:
        result.observed["diagnosis"] = [d.id for d in found]
    top = first_failure(found)
    if top:
        result.cause = top.cause or result.cause
        result.remedy = top.remedy or result.remedy
        result.evidence.extend(top.evidence[:4])
    if log:
        result.evidence.extend(_evidence_from(log, f"rank-{rank}.log", 6))
    stack = outcome.stacks.get(rank)
    if stack:
        result.evidence.append(Evidence(f"rank-{rank}.stack", stack[-3000:]))


def _phase_result(rank: int, node: str | None, rec: PhaseRecord, status: Status, summary: str) -> Result:
    name = rec.name
    return Result(
        id=f"live.{name}",
        title=PHASE_TITLES.get(name, name),
        status=status,
        summary=summary,
        rank=rank,
        node=node,
        phase=name,
        started=rec.failed_at or rec.started,
        duration_s=rec.duration_s,
    )


def _check_result(c: CheckRecord, phase: str, rank: int | None, node: str | None, started: float | None) -> Result:
    return Result(
        id=c.id,
        title=resultids.DECLARED.get(c.id) or c.id.split(".", 2)[-1].replace("_", " "),
        status=Status(c.status),
        summary=c.summary,
        cause=c.cause,
        remedy=c.remedy,
        observed=dict(c.observed),
        expected=dict(c.expected),
        metrics=dict(c.metrics),
        rank=rank,
        node=node,
        phase=phase,
        started=started,
    )


def _merge_checks(payloads: dict[int, RankResult]) -> list[Result]:
    """One Result per check when every rank agrees (rank None), else one per rank that differs."""
    by_id: dict[str, list[tuple[int, PhaseRecord, CheckRecord]]] = {}
    for rank in sorted(payloads):
        for rec in payloads[rank].phases:
            for c in rec.checks:
                by_id.setdefault(c.id, []).append((rank, rec, c))
    results = []
    for entries in by_id.values():
        statuses = {c.status for _, _, c in entries}
        together = _one_summary([c.summary for _, _, c in entries]) if len(statuses) == 1 else None
        if together is not None and "fail" not in statuses:
            rank, rec, c = entries[0]
            r = _check_result(c, rec.name, None, None, None)
            r.summary = together
            if len(entries) > 1:
                r.observed.setdefault("ranks", [e[0] for e in entries])
            results.append(r)
            continue
        for rank, rec, c in entries:
            if c.status in ("fail", "warn") or len(statuses) > 1 or together is None:
                results.append(_check_result(c, rec.name, rank, payloads[rank].node, rec.failed_at or rec.started))
    return results


def _one_summary(summaries: list[str]) -> str | None:
    """What every rank said, as one sentence: the same words ('... (all 2 ranks agree)'), or the same
    words with numbers that differ as ranges ('step 0.10-0.12 s (over 2 ranks)'); None when the words
    differ, so each rank keeps its own result."""
    if len(summaries) == 1:
        return summaries[0]
    if len(set(summaries)) == 1:
        return f"{summaries[0]} ({all_of(len(summaries), 'rank')} agree)"
    folded = fold_summaries(summaries)
    return f"{folded} (the range over {all_of(len(summaries), 'rank')})" if folded else None


def _error_lines(err: PhaseErrorRecord) -> list[str]:
    return [f"{err.type}: {err.message}", *(err.traceback or "").splitlines()[-12:]]


@dataclass
class _Triage:
    """What the steps of merge() learn about the ranks, before the root cause is picked."""

    results: list[Result] = field(default_factory=list)
    primary: list[Result] = field(default_factory=list)
    secondary: list[Result] = field(default_factory=list)
    ended: list[Result] = field(default_factory=list)
    """Ranks torchrun ended after a failure elsewhere."""
    blamed: dict[int, list[int]] = field(default_factory=dict)
    """Blamed rank -> the ranks that blame it."""
    reached: dict[str, set[int]] = field(default_factory=dict)

    def add(self, r: Result, bucket: list[Result] | None) -> None:
        if bucket is not None:
            bucket.append(r)
        self.results.append(r)


# A failed phase whose rank says it only waited for others, or whose error is a peer's death echoed,
# is secondary; any other failure is the rank's own (a stuck rank is sorted out by _laggard_first).
_SECONDARY_WHEN: tuple[tuple[str, Callable[[PhaseRecord, PhaseErrorRecord], bool]], ...] = (
    ("the rank names the ranks it waited for", lambda rec, err: bool(err.blame_ranks)),
    ("the error is a peer's death echoed", lambda rec, err: bool(_PEER_ECHO.search(err.message))),
)


@dataclass(frozen=True)
class _Silent:
    """A rank that stopped inside a phase without reporting it: what the heartbeat and exit status say."""

    rank: int
    code: int | None
    starting: bool
    blamed: bool
    timed_out: bool

    @property
    def ended_by_torchrun(self) -> bool:
        # SIGTERM comes from torchrun ending the group after another rank failed: a consequence, also
        # for a rank still importing torch.
        return self.code in (-15, 143)


# The rank's own failure (primary) when any of these holds; otherwise torchrun ended it (secondary).
_OWN_FAILURE_WHEN: tuple[tuple[str, Callable[[_Silent], bool]], ...] = (
    ("its peers blame it", lambda s: s.blamed),
    ("it exited by itself", lambda s: s.code is not None and not s.ended_by_torchrun),
    ("the run hit its deadline", lambda s: s.timed_out),
    ("it died while starting, not by torchrun's SIGTERM", lambda s: s.starting and not s.ended_by_torchrun),
)


def _passed_phase(rank: int, node: str, rec: PhaseRecord) -> Result:
    n = len(rec.checks)
    summary = f"rank {rank}: {plural(n, 'check')} passed in {float(rec.duration_s or 0):.1f} s"
    return _phase_result(rank, node, rec, Status.PASS, summary)


def _explain_stuck(r: Result, rank: int, rec: PhaseRecord, err: PhaseErrorRecord, outcome: RunOutcome) -> None:
    r.cause = f"rank {rank} made no progress in {rec.name} within its {rec.budget_s} s deadline (last step: {err.step})"
    r.remedy = (
        "see the stack in the evidence: a rank blocked in a collective waits for a peer; "
        "the rank that is furthest behind is the one to look at"
    )
    beat = outcome.heartbeats.get(rank)
    r.observed["progress"] = beat.progress if beat else None


def _phase_error(
    t: _Triage, rank: int, node: str, rec: PhaseRecord, err: PhaseErrorRecord, outcome: RunOutcome
) -> None:
    """A phase that raised: its message, who it blames, the diagnosis of its log, primary or not."""
    name = rec.name
    message = err.message.splitlines()[0] if err.message else err.type
    where = f" (at {err.step})" if err.step else ""
    r = _phase_result(rank, node, rec, Status.FAIL, f"rank {rank} failed in {name}{where}: {message}")
    r.evidence.append(Evidence(f"rank-{rank}.json", f"{err.type}: {err.message}"))
    r.observed["error_type"] = err.type
    for b in err.blame_ranks or ():
        t.blamed.setdefault(b, []).append(rank)
    stuck = rec.kind == "stuck"
    if stuck:
        _explain_stuck(r, rank, rec, err, outcome)
    # The log often says why (e.g. a DataLoader worker's "No space left on device").
    _apply_diagnosis(r, rank, outcome, _error_lines(err))
    # A phase that knew why it stopped (PhaseError) is the best authority on it.
    r.cause = err.cause or r.cause
    r.remedy = err.remedy or r.remedy
    if err.blame_ranks:
        missing = ", ".join(str(b) for b in err.blame_ranks)
        r.cause = r.cause or f"{ranks(list(err.blame_ranks))} did not get this far"
        r.remedy = r.remedy or f"look at rank {missing}: its result below, rank-{missing}.log, its stack"
    secondary = not stuck and any(rule(rec, err) for _, rule in _SECONDARY_WHEN)
    t.add(r, t.secondary if secondary else t.primary)


def _failed_checks(t: _Triage, rank: int, node: str, rec: PhaseRecord) -> None:
    fails = [c for c in rec.checks if c.failed]
    summary = f"rank {rank}: {plural(len(fails), 'check')} failed in {rec.name}: " + "; ".join(c.id for c in fails)
    r = _phase_result(rank, node, rec, Status.FAIL, summary)
    r.cause = fails[0].cause if fails else None
    r.remedy = fails[0].remedy if fails else None
    t.add(r, t.primary)


def _judge_phases(t: _Triage, outcome: RunOutcome, plan: Plan) -> None:
    """Step 1: what each rank reported about each phase it finished."""
    for rank in sorted(outcome.ranks):
        p = outcome.ranks[rank]
        node = p.node or plan.node
        for rec in p.phases:
            t.reached.setdefault(rec.name, set()).add(rank)
            status = rec.status
            if status == "pass":
                t.add(_passed_phase(rank, node, rec), None)
            elif status == "fail" and rec.error is not None:
                _phase_error(t, rank, node, rec, rec.error, outcome)
            elif status == "fail":
                _failed_checks(t, rank, node, rec)
            # status "running": the rank died inside the phase; _judge_silent_ranks reads its heartbeat


def _never_started(t: _Triage, rank: int, node: str, outcome: RunOutcome) -> None:
    who = t.blamed.get(rank)
    rec = PhaseRecord("init", "running", started=min((b.time for b in outcome.heartbeats.values()), default=None))
    r = _phase_result(
        rank,
        node,
        rec,
        Status.FAIL,
        f"rank {rank} never started: no heartbeat from it" + (f"; {ranks(who)} waited for it in init" if who else ""),
    )
    r.cause = "the rank's process never reached the worker's first line (stuck before Python ran, or never launched)"
    r.remedy = (
        f"read rank-{rank}.log and torchrun.log; a rank stuck importing torch or initialising CUDA "
        "often means a broken driver or a hung filesystem"
    )
    _apply_diagnosis(r, rank, outcome, [])
    t.reached["init"].add(rank)
    t.add(r, t.primary)


def _stopped(t: _Triage, s: _Silent, r: Result, where: str, outcome: RunOutcome) -> None:
    """A silent rank whose stop is its own failure: what it died of, and who waited for it."""
    rank = s.rank
    ef = outcome.error_files.get(rank)
    if ef is not None and ef.message:  # torchelastic @record: the uncaught exception
        r.summary += f"; {ef.headline[:300]}"
        r.evidence.append(Evidence(f"rank-{rank}.error.json", ef.message[:3000]))
    if s.blamed:
        r.summary += f"; {ranks(t.blamed[rank])} waited for it"
        r.cause = f"rank {rank} stopped making progress in {r.phase}{where}; its peers gave up waiting"
        r.remedy = f"see rank {rank}'s stack and rank-{rank}.log for where it is stuck"
    _apply_diagnosis(r, rank, outcome, [])
    beat = outcome.heartbeats.get(rank)
    r.observed.update({"exit_code": s.code, "heartbeat": beat.to_dict() if beat else None})
    t.add(r, t.primary)


def _silent_rank(t: _Triage, rank: int, outcome: RunOutcome, plan: Plan) -> None:
    p = outcome.ranks.get(rank)
    beat = outcome.heartbeats.get(rank)
    node = (p.node if p else None) or plan.node
    if beat is None and p is None:
        _never_started(t, rank, node, outcome)
        return
    phases = p.phases if p else ()
    done_phases = {rec.name for rec in phases if rec.status in ("pass", "fail")}
    phase = beat.phase if beat else None
    starting = phase == "start" and not phases
    if starting:
        phase = "init"  # it died between its first heartbeat and its first phase (e.g. importing torch)
    elif phase in (None, "start", "done") or phase in done_phases:
        return
    rec = next((x for x in phases if x.name == phase), PhaseRecord(phase, "running"))
    rec = replace(rec, started=beat.time if beat else rec.started)
    step = beat.step if beat else None
    where = f" (at {step})" if step else ""
    t.reached.setdefault(phase, set()).add(rank)
    s = _Silent(rank, outcome.exit_codes.get(f"rank {rank}"), starting, rank in t.blamed, outcome.timed_out)
    if any(rule(s) for _, rule in _OWN_FAILURE_WHEN):
        how = (
            _signal_text(s.code)
            if s.code is not None
            else ("still running at the deadline" if outcome.timed_out else "ended")
        )
        summary = (
            f"rank {rank} stopped while starting, before its first phase: {how}"
            if starting
            else f"rank {rank} stopped in {phase}{where}: {how}"
        )
        _stopped(t, s, _phase_result(rank, node, rec, Status.FAIL, summary), where, outcome)
        return
    r = _phase_result(
        rank,
        node,
        rec,
        Status.SKIP,
        f"rank {rank} was ended by torchrun "
        f"{'while starting' if starting else f'in {phase}{where}'} after another rank failed",
    )
    r.observed.update({"exit_code": s.code})
    t.ended.append(r)
    t.add(r, t.secondary)


def _judge_silent_ranks(t: _Triage, outcome: RunOutcome, plan: Plan, world: int) -> None:
    """Step 2: ranks that died, hung or never started: what the heartbeat and the exit status say."""
    for rank in sorted(plan.ranks) if plan.ranks is not None else range(world):
        _silent_rank(t, rank, outcome, plan)


def _stopped_from_outside(t: _Triage, elsewhere: bool) -> None:
    """Step 3: ranks ended by torchrun while nobody else failed: the SIGTERM came from outside the job,
    or (`elsewhere`: ranks ran on other nodes, unseen here) from a rank failing on another node."""
    if not t.ended or t.primary:
        return
    for r in t.ended:
        r.status = Status.FAIL
        if elsewhere:
            r.summary = r.summary.replace("after another rank failed", "and no rank on this node had failed")
            r.cause = (
                "a rank on another node failed (torchrun then ends every node's ranks), or the job was stopped "
                "from outside (SIGTERM)"
            )
            r.remedy = "read the other nodes' reports for the first rank that failed; else look for what sent SIGTERM"
        else:
            r.summary = r.summary.replace("after another rank failed", "and no rank had failed")
            r.cause = "the job was stopped from outside: torchrun (or what started it) got SIGTERM"
            r.remedy = "look for what sent SIGTERM: a scheduler's time limit or preemption, an OOM-killed agent, Ctrl-C"
        t.secondary.remove(r)
        t.primary.append(r)


def _laggard_first(t: _Triage) -> None:
    """Step 4: among stuck ranks, the one furthest behind is the cause; the others waited for it."""
    stuck = [r for r in t.primary if r.observed.get("progress") is not None]
    if len(stuck) <= 1:
        return
    least = min(r.observed["progress"] for r in stuck)
    for r in stuck:
        if r.observed["progress"] > least:
            t.primary.remove(r)
            t.secondary.append(r)


def _teardown(payloads: dict[int, RankResult]) -> list[Result]:
    stuck_teardown = sorted(r for r, p in payloads.items() if p.teardown_stuck)
    if not stuck_teardown:
        return []
    return [
        Result(
            "live.teardown",
            "ranks shut down cleanly",
            Status.WARN,
            f"destroy_process_group() did not return on {ranks(stuck_teardown)}; "
            + ("it was ended" if len(stuck_teardown) == 1 else "they were ended"),
            cause="the process group hung while shutting down (seen with some NCCL versions)",
            remedy="training scripts should call destroy_process_group() with a timeout guard; "
            "try a newer NCCL if it hangs there",
        )
    ]


def _unreached(t: _Triage, plan: Plan) -> list[Result]:
    """Step 5: a planned phase no rank reached is a skip that names where the run stopped."""
    out: list[Result] = []
    first_failed_phase = None
    for name in plan.phases:
        if not t.reached.get(name):
            out.append(
                Result(
                    id=f"live.{name}",
                    title=PHASE_TITLES.get(name, name),
                    status=Status.SKIP,
                    summary=f"not reached: the run stopped in {first_failed_phase or 'an earlier phase'}",
                    phase=name,
                )
            )
        elif first_failed_phase is None and any(r.phase == name and r.status is Status.FAIL for r in t.results):
            first_failed_phase = name
    return out


def _pick_root(t: _Triage) -> Result | None:
    """Step 6: the earliest primary failure (secondary ones when no rank failed on its own), put first."""
    pool = t.primary or t.secondary
    timed = [r for r in pool if r.started is not None and r.status is Status.FAIL]
    root = (
        min(timed, key=lambda r: r.started or 0.0)
        if timed
        else next((r for r in pool if r.status is Status.FAIL), None)
    )
    if root is None:
        return None
    # The root first, so every renderer shows it before the failures it caused.
    t.results.remove(root)
    t.results.insert(0, root)
    for r in t.secondary:
        if r.status is Status.FAIL and r is not root:
            r.summary += f" [a consequence: rank {root.rank} failed first, in {root.phase}]"
    return root


def _live_facts(outcome: RunOutcome, plan: Plan, world: int, root: Result | None) -> LiveFacts:
    payloads, beats = outcome.ranks, outcome.heartbeats
    return LiveFacts(
        backend=plan.backend,
        world_size=world,
        nnodes=plan.nnodes,
        nproc_per_node=plan.nproc,
        ranks_joined=len({r for r in beats} | set(payloads)),
        phases={r: {rec.name: rec.status for rec in p.phases} for r, p in payloads.items()},
        phase_times={
            r: [
                PhaseTime(name=rec.name, started=rec.started, duration_s=rec.duration_s, status=rec.status)
                for rec in p.phases
                if rec.started is not None
            ]
            for r, p in payloads.items()
        },
        heartbeats={r: BeatFacts(phase=b.phase, step=b.step, time=b.time) for r, b in beats.items()},
        devices={r: p.body["device"] for r, p in payloads.items() if p.body.get("device")},
        exit_codes=outcome.exit_codes,
        root_cause=(
            RootFacts(id=root.id, rank=root.rank, node=root.node, phase=root.phase, summary=root.summary)
            if root
            else None
        ),
    )


def merge(outcome: RunOutcome, plan: Plan) -> Merged:
    """The ranks' payloads and the run's outcome -> Results, in named steps; the root cause first."""
    payloads = outcome.ranks
    world = plan.world_size or max([*payloads, *outcome.heartbeats, -1]) + 1
    t = _Triage(reached={p: set() for p in plan.phases})
    _judge_phases(t, outcome, plan)
    _judge_silent_ranks(t, outcome, plan, world)
    _stopped_from_outside(t, elsewhere=plan.ranks is not None and len(plan.ranks) < world)
    _laggard_first(t)
    t.results.extend(_merge_checks(payloads))
    t.results.extend(_teardown(payloads))
    t.results.extend(_unreached(t, plan))
    root = _pick_root(t)
    _name_unreadable_files(t.results, outcome.unreadable)
    t.results.extend(_nccl_results(outcome, plan))
    rank0 = payloads.get(0) or (payloads[min(payloads)] if payloads else None)
    return Merged(
        results=t.results,
        root=root,
        torch_facts=rank0.body.get("torch") if rank0 else None,
        live_facts=_live_facts(outcome, plan, world, root),
    )


def _name_unreadable_files(results: list[Result], unreadable: dict[str, str]) -> None:
    """A rank's result or heartbeat that was no record (cut short, foreign, another version) left that rank
    judged from less than it wrote: its failing results say which file and why."""
    for name, why in sorted(unreadable.items()):
        rank = layout.rank_of(name, "json")
        rank = layout.rank_of(name, "hb") if rank is None else rank
        for r in results:
            if r.rank == rank and r.status is not Status.PASS:
                r.evidence.append(Evidence(name, why))


def _nccl_results(outcome: RunOutcome, plan: Plan) -> list[Result]:
    per_rank = {name: nccl_log.parse(lines) for name, lines in outcome.logs.items() if name.startswith("nccl-rank-")}
    if plan.backend != "nccl":
        return []
    if not per_rank:
        return [
            Result(
                "live.nccl.transport",
                "NCCL transports",
                Status.SKIP,
                "no NCCL_DEBUG output was captured from the ranks (the run stopped before NCCL initialised?)",
            )
        ]
    transports: dict[str, int] = {}
    for info in per_rank.values():
        for fam, n in info["transports"].items():
            transports[fam] = transports.get(fam, 0) + n
    version = next((i["version"] for i in per_rank.values() if i["version"]), None)
    ib = next((i["ib_devices"] for i in per_rank.values() if i["ib_devices"]), None)
    observed = {
        "transports": transports,
        "version": version,
        "ib_devices": ib,
        "socket_interfaces": next((i["socket_interfaces"] for i in per_rank.values() if i["socket_interfaces"]), None),
        "per_rank": {k: v["transports"] for k, v in per_rank.items()},
    }
    multi_node = plan.nnodes not in ("1", "1:1")
    if multi_node and "NET/Socket" in transports and (ib or plan.ib_present):
        return [
            Result(
                "live.nccl.transport",
                "NCCL transports",
                Status.WARN,
                f"traffic between nodes goes over NET/Socket although InfiniBand devices exist ({ib or 'seen in /sys/class/infiniband'})",
                cause="NCCL could not use the IB devices (NCCL_IB_DISABLE=1, missing RDMA libraries or "
                "devices not passed into the container), so it fell back to TCP sockets",
                remedy="unset NCCL_IB_DISABLE; install rdma-core/libibverbs; pass /dev/infiniband and "
                "IPC_LOCK into the container; check with NCCL_DEBUG=INFO that 'NET/IB : Using' appears",
                observed=observed,
            )
        ]
    summary = (
        ", ".join(f"{k} ({plural(int(v), 'channel')})" for k, v in sorted(transports.items()))
        if transports
        else f"no inter-rank channels (world size {plan.world_size}); NCCL {version or '?'} initialised"
    )
    return [Result("live.nccl.transport", "NCCL transports", Status.PASS, summary, observed=observed)]
