"""WatchOutcome -> Report: the job's end, its first failure, hangs, balance, what the doctor added."""

from __future__ import annotations

import signal
import socket
from dataclasses import asdict, dataclass
from typing import TypedDict

from ddp_doctor import diagnose, words
from ddp_doctor.diagnose import longtail
from ddp_doctor.diagnose.lines import Origin
from ddp_doctor.jobwatch import balance, collectives, hang, ras
from ddp_doctor.jobwatch.envplan import describe
from ddp_doctor.jobwatch.hook.ddp_doctor_rankfiles import RankExit
from ddp_doctor.jobwatch.nvml import GpuName, NvmlSample, Timeline
from ddp_doctor.jobwatch.stacks import phase_of_traceback
from ddp_doctor.jobwatch.supervise import HangEvent, QuietSpell, WatchOutcome
from ddp_doctor.knowledge import exitcodes
from ddp_doctor.report import Evidence, Report, Result, Status
from ddp_doctor.rundir import reader
from ddp_doctor.rundir.logs import parse_exit_codes, tails

MAX_TIMELINE_SAMPLES = 900
MAX_LOG_LINES = 4000
_CLEANUP_SIGNALS = (-15, -2, 143, 130)  # the launcher's SIGTERM / Ctrl-C on the way out: consequences


def _exit_codes(out: WatchOutcome, logs: dict[str, list[str]]) -> dict[str, int]:
    codes: dict[str, int] = {}
    for name, lines in logs.items():
        if name.startswith("proc-"):
            codes.update(parse_exit_codes("\n".join(lines)))
    if out.returncode is not None:
        codes["launcher"] = out.returncode
    return codes


@dataclass(frozen=True)
class RankStory:
    """How one rank's process went (facts["run"]["ranks"]; render/html_charts draws it)."""

    pid: int | None
    started_s: float
    end: str
    """exit | exception | signal | gone | running"""
    ended_s: float
    detail: str | None = None
    traceback: str | None = None
    """The exception's traceback, when it raised."""
    exitcode: int | None = None
    """As the launcher reported it; None when it did not."""

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"pid": self.pid, "started_s": self.started_s, "end": self.end, "detail": self.detail}
        if self.traceback is not None:
            out["traceback"] = self.traceback
        out["ended_s"] = self.ended_s
        if self.exitcode is not None:
            out["exitcode"] = self.exitcode
        return out


def _rank_story(out: WatchOutcome, exits: dict[int, RankExit], codes: dict[str, int]) -> dict[int, RankStory]:
    """rank -> how its process started and ended."""
    errors = reader.read_error_files(out.run_dir)
    story: dict[int, RankStory] = {}
    for r, rec in sorted(out.ranks.items()):
        pid, started_s = rec.pid, round(rec.time - out.started_epoch, 2)
        ex = exits.get(r)
        code = codes.get(f"rank {r}")
        if r in errors:
            error = errors[r]
            ended = round((ex.time if ex else out.gone_at.get(r, 0)) - out.started_epoch, 2)
            story[r] = RankStory(pid, started_s, "exception", ended, error.headline, error.traceback[-6000:], code)
        elif ex is not None:
            story[r] = RankStory(pid, started_s, "exit", round(ex.time - out.started_epoch, 2), None, None, code)
        elif r in out.gone_at:
            end = "signal" if code is not None and code < 0 else "gone"
            ended = round(out.gone_at[r] - out.started_epoch, 2)
            story[r] = RankStory(pid, started_s, end, ended, _signal_text(code), None, code)
        else:
            story[r] = RankStory(pid, started_s, "running", round(out.duration_s, 2), None, None, code)
    return story


def _signal_text(code: int | None) -> str:
    if code is None:
        return "ended without Python's exit path (a signal, os._exit or a crash; the launcher did not say which)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _is_consequence(s: RankStory) -> bool:
    if s.end == "signal" and s.exitcode in _CLEANUP_SIGNALS:
        return True
    if s.end == "exception":
        found = diagnose.diagnose({"error": [str(s.detail or "")]}, {})
        tiers = [sig.tier if (sig := diagnose.signature(r.id)) else None for r in found]
        return bool(tiers) and all(t in ("symptom", "cascade") for t in tiers)
    return False


def first_failure(story: dict[int, RankStory]) -> int | None:
    failed = {r: s for r, s in story.items() if s.end in ("exception", "signal", "gone")}
    if not failed:
        return None
    primary = {r: s for r, s in failed.items() if not _is_consequence(s)} or failed
    return min(primary, key=lambda r: (primary[r].ended_s or 0.0, r))


def _failure_result(out: WatchOutcome, story: dict[int, RankStory], diag: list[Result]) -> Result | None:
    rank = first_failure(story)
    if rank is None and (out.returncode in (0, None) or out.interrupted):
        return None
    if rank is None:
        return Result(
            id="run.failure",
            title="The job failed",
            status=Status.FAIL,
            summary=f"the launcher exited {out.returncode}; no rank reported a failure",
            cause=diag[0].cause if diag else None,
            remedy=diag[0].remedy if diag else "Read the job's output above; the run directory keeps every rank's log.",
        )
    s = story[rank]
    tb = s.traceback or ""
    # The same reading of a traceback as `explain`'s: the exception line, and the phase from the frames.
    raised = longtail.read_traceback(tb, f"rank-{rank}.error.json", Origin(rank=rank)) if tb else None
    placement = longtail.placement(raised) if raised is not None else None
    noun = longtail.phase_noun(placement) if placement is not None else None
    phase = noun or (phase_of_traceback(tb) if tb else "unknown (no traceback: the process was killed)")
    what = raised.text if raised is not None and not raised.cut else (s.detail or s.end)
    match = _signature_of(rank, diag, [str(s.detail or ""), *tb.splitlines()])
    evidence_lines = [Evidence(f"rank-{rank}.error.json", line) for line in tb.strip().splitlines()[-8:]]
    unknown = longtail.result(raised, []) if raised is not None and match is None else None
    return Result(
        id="run.failure",
        title="First failing rank",
        status=Status.FAIL,
        summary=f"rank {rank} failed first ({s.ended_s:.1f} s after start), in {phase}: {what}",
        cause=match.cause
        if match
        else unknown.cause
        if unknown
        else f"rank {rank} ended with {what}; no known failure signature explains it, so it is the job's own error",
        remedy=match.remedy
        if match
        else (unknown.remedy + "\n" if unknown and unknown.remedy else "")
        + f"Read rank {rank}'s traceback (below; rank-{rank}.log in the run directory has its whole output).",
        rank=rank,
        phase=phase,
        evidence=evidence_lines or (match.evidence[:4] if match else []),
        observed={"diagnosis": match.id if match else None, "end": s.end, "consequence": _is_consequence(s)},
        started=out.started_epoch + float(s.ended_s or 0.0),
    )


def _signature_of(rank: int, diag: list[Result], own_lines: list[str]) -> Result | None:
    """The failure signature that explains this rank's failure: one seen on this rank (its prefix, its own log
    file), else one that matches its own exception and traceback. Another rank's lost-peer error is a
    consequence, never this rank's cause. A cause before a symptom."""

    def ranked(found: list[Result]) -> Result | None:
        fails = [d for d in found if d.status is Status.FAIL and d.id != "diag.unknown"]
        causes = [d for d in fails if (sig := diagnose.signature(d.id)) and sig.tier == "cause"]
        best = causes or fails
        return best[0] if best else None

    def seen_on_rank(d: Result) -> bool:
        own_file = any(e.source.split(" [", 1)[0].startswith(f"rank-{rank}.") for e in d.evidence)
        return d.rank == rank or rank in d.observed.get("ranks", []) or own_file

    return ranked([d for d in diag if seen_on_rank(d)]) or ranked(diagnose.diagnose({f"rank-{rank}": own_lines}, {}))


HANG_REMEDY = {
    "collective": "Make every rank reach the same collectives in the same order: the behind rank's stack shows "
    "where it stopped (a rank-dependent branch, a data loader that ran dry, an exception swallowed on one rank). "
    "Set a shorter init_process_group(timeout=...) so the watchdog ends a real hang sooner.",
    "cuda": "The GPU never finishes the work the rank waits for: check the kernel (an endless loop, a spin-wait "
    "on memory another rank never writes), run compute-sanitizer on a small input, and check `nvidia-smi -q` "
    "for Xid errors on this GPU.",
    "stalled": "Nothing moved: read the stacks below (a deadlock on a lock, a blocking read, input() on a "
    "non-interactive job).",
    # TORCH_DISTRIBUTED_DEBUG=DETAIL wraps every process group to check op, shapes and dtypes across ranks:
    # https://pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications
    "mismatch": "Every rank must call the same collective, with the same sizes and dtypes, in the same order on "
    "each process group: find where the two calls named above are made (a rank-dependent branch, a last batch "
    "of another size, a tensor built in another dtype on one rank). TORCH_DISTRIBUTED_DEBUG=DETAIL checks each "
    "collective's op and shapes across ranks at run time and raises at the first difference.",
}
"""What to do about each kind of hang (hang.Judgement.kind)."""


def _hang_result(event: HangEvent, index: int) -> Result:
    j = event.judgement
    ev = []
    for r, st in sorted(j.states.items()):
        ev.append(
            Evidence(f"rank {r}", f"{st['state']}: {st['doing']}" + (f" at {st['where']}" if st["where"] else ""))
        )
    if event.stack_method:
        ev.append(Evidence("stacks", event.stack_method))
    if event.threshold is not None:
        ev.append(
            Evidence("threshold", f"looked after {event.threshold.seconds:.0f} s of silence ({event.threshold.why})")
        )
    if event.compared is not None:
        ev.append(Evidence("collectives", event.compared.message()))
        if event.compared.missing:
            ev.append(Evidence("missing dumps", event.compared.missing_text()))
    ranks_by_pid = {pid: r for r, pid in event.pids.items()}
    if event.ras is not None:
        ev.append(Evidence("NCCL RAS", ras.headline(event.ras, ranks_by_pid)))
    remedy = HANG_REMEDY[j.kind]
    return Result(
        id="run.hang",
        title="The job hung",
        status=Status.FAIL,
        summary=j.message + (" (job ended by --on-hang kill)" if event.killed else ""),
        cause="the ranks called different collectives (a mismatch, not a lag)"
        if j.kind == "mismatch"
        else f"hang in {j.kind}: "
        + (f"behind: {', '.join(f'rank {r}' for r in j.behind)}" if j.behind else "no rank behind on this node"),
        remedy=remedy,
        rank=j.behind[0] if len(j.behind) == 1 else None,
        phase=j.kind,
        evidence=ev,
        observed={
            "behind": list(j.behind),
            "kind": j.kind,
            "at_s": event.at_s,
            "index": index,
            "stacks_method": event.stack_method,
            "ras": asdict(RasFacts.of(event.ras, ranks_by_pid)) if event.ras else None,
            "threshold": event.threshold.why if event.threshold else None,
            "collectives": _compared_facts(event.compared),
        },
        metrics={
            "detected_after_s": event.at_s,
            "silent_s": event.silent_s,
            **({"threshold_s": round(event.threshold.seconds, 1)} if event.threshold else {}),
        },
    )


def _compared_facts(c: collectives.Comparison | None) -> dict[str, object] | None:
    if c is None:
        return None
    return {
        "verdict": c.verdict,
        "group": c.group,
        "seq": c.seq,
        "sides": [{"ranks": list(s.ranks), "call": s.call} for s in c.sides],
        "behind": list(c.behind),
        "missing": [{"rank": m.rank, "why": m.why} for m in c.missing],
        "source": c.source,
        "message": c.message(),
    }


@dataclass(frozen=True)
class RasFacts:
    """NCCL RAS's answer on a hang, as a run.hang result's observed["ras"] shows it."""

    addr: str
    available: bool
    """Whether RAS answered with a report."""
    why_not: str | None
    seconds: float
    nccl_version: str | None
    findings: list[str]
    """One line per thing RAS says is wrong, with our rank where its process is one of ours."""
    dead_pids: list[int]
    missing_pids: list[int]
    groups: list[str]
    """Each communicator group's status and errors."""

    @classmethod
    def of(cls, answer: ras.RasAnswer, ranks_by_pid: dict[int, int]) -> RasFacts:
        rep = answer.report
        return cls(
            addr=answer.addr,
            available=rep is not None,
            why_not=answer.why_not or None,
            seconds=answer.seconds,
            nccl_version=rep.nccl_version if rep else None,
            findings=ras.findings(rep, ranks_by_pid) if rep else [],
            dead_pids=[p.pid for p in rep.dead] if rep else [],
            missing_pids=[p.pid for p in rep.missing_processes] if rep else [],
            groups=[f"{g.status} {g.errors}" for g in rep.groups] if rep else [],
        )


def _balance_results(out: WatchOutcome) -> list[Result]:
    results: list[Result] = []
    st = balance.straggler(out.waits)
    if out.hangs:
        st = balance.Straggler(None, st.shares, {}, None, "not judged: the job hung (see run.hang)")
    results.append(
        Result(
            id="run.balance.straggler",
            title="Straggler rank",
            status=Status.SKIP
            if not st.shares or min(st.samples.values() or [0]) < balance.MIN_SAMPLES
            else Status.WARN
            if st.rank is not None
            else Status.PASS,
            summary=st.message,
            cause="In synchronous training every rank waits for the slowest one at each collective; this rank "
            "rarely waits, so the others wait for it."
            if st.rank is not None
            else None,
            remedy="Look at what the straggler does outside the collectives (its hot spot is named): uneven data, "
            "a slower GPU or CPU, extra work on one rank (logging, eval, checkpointing on rank 0 only)."
            if st.rank is not None
            else None,
            rank=st.rank,
            metrics={f"wait_share_rank_{r}": round(v, 3) for r, v in st.shares.items()},
            observed={"samples": {str(r): n for r, n in st.samples.items()}, "hot_spot": st.where},
        )
    )
    rates = balance.step_rates(out.steps)
    results.append(
        Result(
            id="run.balance.steps",
            title="Step rate per rank",
            status=Status.PASS if rates else Status.SKIP,
            summary=", ".join(f"rank {r} {v['steps_per_s']:.2f} steps/s" for r, v in sorted(rates.items()))
            if rates
            else "fewer than two step lines ('step N', 'iter N') seen at different times in the ranks' output",
            metrics={f"steps_per_s_rank_{r}": v["steps_per_s"] for r, v in rates.items()},
        )
    )
    results.append(_gpu_load(out.timeline))
    return results


def _gpu_load(tl: Timeline | None) -> Result:
    if tl is None or tl.note:
        return Result("run.balance.gpu", "GPU load", Status.SKIP, (tl.note if tl else None) or "no timeline")
    summary = tl.summary()
    bal = balance.gpu_balance(summary)
    text = "; ".join(
        f"GPU {g}: util mean {s['util_mean_pct']:.0f}% (max {s['util_max_pct']:.0f}%), mem max {s['mem_max_mib']:.0f} MiB"
        for g, s in summary.items()
    )
    return Result(
        id="run.balance.gpu",
        title="GPU load",
        status=Status.WARN if bal.uneven else Status.PASS,
        summary=(f"uneven ({bal.spread_pct:.0f} points between GPUs): " if bal.uneven else "") + (text or "no samples"),
        metrics={f"util_mean_pct_gpu_{g}": s["util_mean_pct"] for g, s in summary.items()},
    )


def exit_class(report: Report, out: WatchOutcome) -> str:
    if out.interrupted:
        return "interrupted"
    if any(r.id == "run.hang" for r in report.results):
        return "hang"
    if out.timeline is not None and out.timeline.lost_gpus():
        return "infrastructure"
    diag = [r for r in report.results if r.id.startswith("diag.") and r.status is Status.FAIL]
    failed = report.verdict().value == "fail"
    first = next((r for r in report.results if r.id == "run.failure" and r.rank is not None), None)
    if first is not None:
        # The first failing rank decides: the others' lost-peer errors are its consequence, not a network fault.
        return "infrastructure" if first.observed.get("diagnosis") in exitcodes.infrastructure_ids() else "job_failed"
    if failed and diag and diag[0].id in exitcodes.infrastructure_ids():
        return "infrastructure"
    return "job_failed" if failed else "ok"


def build_report(out: WatchOutcome) -> Report:
    report = Report(command="run", target={"host": socket.gethostname(), "command": describe(out.command)})
    logs = tails(out.run_dir, MAX_LOG_LINES, 1024 * 1024)
    codes = _exit_codes(out, logs)
    exits = reader.read_hook_files(out.run_dir, "exit", RankExit.from_json)
    unreadable = {**out.unreadable, **exits.unreadable}
    story = _rank_story(out, exits.records, codes)
    failed_job = out.returncode not in (0, None) and not out.interrupted
    diag = (
        diagnose.diagnose(logs, {k: v for k, v in codes.items() if k != "launcher"}) if failed_job or out.hangs else []
    )
    report.add(_job_result(out, unreadable))
    killed_for_hang = any(e.killed for e in out.hangs)
    # A job the doctor ended for a hang fails because of the hang; its ranks' ends are consequences.
    failure = _failure_result(out, story, diag) if failed_job and not killed_for_hang else None
    if failure:
        report.add(failure)
    for i, event in enumerate(out.hangs):
        report.add(_hang_result(event, i))
    if out.busy:
        report.add(_quiet_result(out.busy))
    report.extend(diag)
    report.extend(_balance_results(out))
    report.extend(_doctor_results(out))
    if failure:
        report.root_cause = "run.failure"
    elif out.hangs:
        report.root_cause = "run.hang"
    run = _facts(out, story, codes)
    run["unreadable"] = unreadable
    run["exit_class"] = exit_class(report, out)
    report.facts["run"] = run
    return report


def _job_result(out: WatchOutcome, unreadable: dict[str, str]) -> Result:
    """run.job; a hook file that is no record leaves the doctor blind to part of a rank's life: a PASS says
    so as a WARN, and every verdict names the file and why."""
    job_ok = out.returncode == 0 and not out.hangs
    status = Status.PASS if job_ok else Status.WARN if out.interrupted else Status.FAIL
    blind = (
        f"; {words.plural(len(unreadable), 'file')} of the startup hook unreadable ({', '.join(sorted(unreadable))}), "
        "so the ranks' starts and ends are judged from less"
        if unreadable
        else ""
    )
    return Result(
        id="run.job",
        title="The job",
        status=Status.WARN if status is Status.PASS and unreadable else status,
        summary=f"{describe(out.command)} exited {out.returncode} after {out.duration_s:.1f} s; "
        f"{words.plural(len(out.ranks), 'rank')} seen"
        + ("; interrupted (" + ", ".join(out.signals) + ")" if out.interrupted else "")
        + blind,
        evidence=[Evidence(name, why) for name, why in sorted(unreadable.items())],
        metrics={"duration_s": out.duration_s, "ranks": float(len(out.ranks))},
        observed={"exit_status": out.returncode},
    )


def _quiet_result(busy: list[QuietSpell]) -> Result:
    first, last = busy[0], busy[-1]
    span = (
        f"at {first['at_s']:.0f} s"
        if len(busy) == 1
        else f"{len(busy)} times from {first['at_s']:.0f} s to {last['at_s']:.0f} s"
    )
    return Result(
        "run.quiet",
        "Quiet, not hung",
        Status.PASS,
        f"examined {span}; last: {last['message']}",
        observed={"looks": busy[-20:]},
    )


def _doctor_results(out: WatchOutcome) -> list[Result]:
    """What the doctor added to the job, and that it left nothing behind."""
    return [
        Result(
            id="run.observability",
            title="What the doctor added",
            status=Status.PASS,
            summary="; ".join(f"{i.name}: {i.state}" for i in out.observability),
            observed={"items": [i.to_dict() for i in out.observability], "stack_notes": out.stack_notes},
        ),
        _cleanup(out),
    ]


def _cleanup(out: WatchOutcome) -> Result:
    parts = [
        f"ended {words.plural(out.leftovers, 'process', 'processes')} of the job still running after the launcher exited"
        if out.leftovers
        else "no process of the job outlived it"
    ]
    if out.shm_removed:
        parts.append(f"removed {len(out.shm_removed)} /dev/shm entries of torch and NCCL")
    if out.shm_left:
        size = sum(n for _, n in out.shm_left)
        names = words.listing([name for name, _ in out.shm_left])
        parts.append(
            f"{words.plural(len(out.shm_left), '/dev/shm entry', '/dev/shm entries')} ({words.human_bytes(size)}) appeared "
            f"during the job and no process holds them: {names}"
        )
    return Result(
        id="run.cleanup",
        title="Nothing left behind",
        status=Status.WARN if out.leftovers or out.shm_left else Status.PASS,
        summary="; ".join(parts),
        remedy=(
            "/dev/shm is RAM: entries left there hold it until deleted or the node reboots, and fill the next job's "
            "/dev/shm. Find which part of the job makes them (a library's shared-memory buffers it never unlinks, "
            "e.g. DeepSpeed's CPU comm op leaves deepspeed_allreduce_buffer_*) and delete them after the job: "
            "rm /dev/shm/NAME"
            if out.shm_left
            else None
        ),
        observed={"shm_left": [{"name": n, "bytes": b} for n, b in out.shm_left]} if out.shm_left else {},
    )


class WatchedGpus(TypedDict):
    """facts["run"]["gpu"]: the NVML timeline, thinned to at most MAX_TIMELINE_SAMPLES samples."""

    note: str | None
    devices: list[GpuName]
    summary: dict[str, dict[str, float]]
    """GPU index -> its utilisation and memory over the run."""
    timeline: list[NvmlSample]


class WatchedHang(TypedDict):
    """facts["run"]["hangs"][i]: one hang as the doctor examined it."""

    at_s: float
    at_epoch: float
    silent_s: float
    threshold_s: float | None
    kind: str
    behind: list[int]
    message: str
    states: dict[str, hang.RankLook]
    stacks: dict[str, dict[str, str]]
    """rank -> the method that took its stack and the stack's end."""
    stacks_method: str
    ras: str | None
    """NCCL RAS's report (its end), or why there is none."""
    flight_recorder: dict[str, dict[str, object]]
    """rank -> its RecorderSummary."""
    killed: bool


class WatchedRun(TypedDict, total=False):
    """facts["run"] of `ddp-doctor run`'s report, as written (render/html_charts.RunFacts is the part it draws;
    node 0 gathers each node's)."""

    command: list[str]
    run_dir: str
    returncode: int | None
    duration_s: float
    exit_codes: dict[str, int]
    ranks: dict[str, dict[str, object]]
    """rank -> its RankStory."""
    gpu: WatchedGpus
    hangs: list[WatchedHang]
    quiet: list[QuietSpell]
    wait_shares: dict[str, float]
    signals: list[str]
    interrupted: bool
    leftover_processes: int
    unreadable: dict[str, str]
    """A startup-hook file that is no record -> why."""
    exit_class: str
    """ok, job_failed, hang, infrastructure or interrupted (exit_class)."""


def _hang_facts(e: HangEvent) -> WatchedHang:
    return WatchedHang(
        at_s=e.at_s,
        at_epoch=round(e.at_epoch, 3),
        silent_s=e.silent_s,
        threshold_s=e.threshold.seconds if e.threshold else None,
        kind=e.judgement.kind,
        behind=list(e.judgement.behind),
        message=e.judgement.message,
        states={str(r): v for r, v in e.judgement.states.items()},
        stacks={str(r): {"method": s.method, "text": s.text[-12000:]} for r, s in e.stacks.items()},
        stacks_method=e.stack_method,
        ras=e.ras.report.text[-8000:] if e.ras and e.ras.report else (e.ras.why_not if e.ras else None),
        flight_recorder={str(r): asdict(v) for r, v in e.flight_recorder.items()},
        killed=e.killed,
    )


def _facts(out: WatchOutcome, story: dict[int, RankStory], codes: dict[str, int]) -> WatchedRun:
    tl = out.timeline
    samples = tl.samples if tl else []
    step = max(1, len(samples) // MAX_TIMELINE_SAMPLES)
    return WatchedRun(
        command=list(out.command),
        run_dir=str(out.run_dir),
        returncode=out.returncode,
        duration_s=out.duration_s,
        exit_codes=codes,
        ranks={str(r): s.to_dict() for r, s in story.items()},
        gpu=WatchedGpus(
            note=tl.note if tl else None,
            devices=tl.devices if tl else [],
            summary={str(g): s for g, s in (tl.summary() if tl else {}).items()},
            timeline=samples[::step],
        ),
        hangs=[_hang_facts(e) for e in out.hangs],
        quiet=out.busy,
        wait_shares={str(r): round(v, 3) for r, v in out.waits.shares().items()},
        signals=out.signals,
        interrupted=out.interrupted,
        leftover_processes=out.leftovers,
    )
