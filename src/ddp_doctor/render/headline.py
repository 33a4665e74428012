"""The headline: one or two sentences that say what a report verified and what it did not.

Written into the report once (`Report.headline`, a JSON field) and shown first by the text,
Markdown and HTML renderings. A report saved before the field existed gets it composed here,
from its results and facts, so old reports render the same way.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from typing import TypedDict

from ddp_doctor.report import Report, Result, Status
from ddp_doctor.words import count, gbps, listing, plural, tidy_numbers

# The live chain's phases, as a person calls them.
PHASE_WORDS = {
    "init": "init_process_group",
    "collectives": "collectives",
    "dataloader": "DataLoader through /dev/shm",
    "sampler": "DistributedSampler",
    "ddp": "DDP training",
    "balance": "load balance",
    "gpu_health": "GPU health",
    "cluster": "cross-node checks",
}
BACKEND_WORDS = {"nccl": "NCCL", "gloo": "gloo", "mpi": "MPI"}


# The parts of a report's facts (its JSON) that a headline reads. Any report, also one saved by an
# older version, may lack a key or hold another type there: each is read with .get and checked.
class LiveSection(TypedDict, total=False):
    """The report's facts.live as render reads it: every key optional (older reports, a run cut short)."""

    world_size: int
    backend: str
    nnodes: str | int
    devices: dict[str, dict[str, object]]
    """rank -> the device it used: type, name, uuid, pci_bus_id."""
    phases: dict[str, dict[str, str]]
    """rank -> phase -> its status."""


class GpuCount(TypedDict, total=False):
    count: int


class TorchBuild(TypedDict, total=False):
    flavour: str


class LintedFile(TypedDict, total=False):
    """One file of `lint` (facts["files"]): what it was read as and what was found, or why it was not read."""

    file: str
    kind: str | None
    units: int
    findings: int
    error: str


class LogFacts(TypedDict, total=False):
    lines: int


def headline(report: Report) -> str:
    return report.headline or compose(report)


def compose(report: Report) -> str:
    make = _BY_COMMAND.get(report.command, _generic)
    return tidy_numbers(make(report))


# ---- check ---------------------------------------------------------------------------------------


def _check(report: Report) -> str:
    image = report.target.get("image")
    where = f"in image {image}" if image else "here"
    ids = {r.id for r in report.results}
    container = _first(report, "image.container")
    if container is not None and container.status is Status.ERROR:
        return f"The check could not run in image {image}: {_sentence(container.summary)}"
    if "live.launch" not in ids:
        return _static(report, where)
    live: LiveSection = report.facts.get("live") or LiveSection()
    failed = report.failures()
    live_failed = [r for r in failed if r.id.startswith("live.")]
    if live_failed:
        # A cross-node root cause (a lost link, a failed peer node) explains the live failures here.
        cross = [r for r in failed if r.id == report.root_cause and r.id.startswith("multinode.")]
        root = cross[0] if cross else _root(report, live_failed)
        passed = _phases_passed(live)
        before = f" Before it, {listing([PHASE_WORDS.get(p, p) for p in passed], 6)} passed." if passed else ""
        return (
            f"Distributed training does not work {where}: {_what(root)}{_on_rank(root)} failed: "
            f"{_sentence(_unranked(root.summary))}{before}"
        )
    ran = _what_ran(report, live)
    gpus = _gpu_names(live)
    first = f"Distributed training works {where} on {'GPU' if gpus else 'CPU'}: {ran}"
    if failed:
        root = _root(report, failed)
        first += f", but {_what(root)} failed: {_sentence(_unranked(root.summary))}"
    else:
        first += "."
    if gpus:
        backend = str(live.get("backend") or "")
        second = "NCCL on the GPU was verified." if backend == "nccl" else f"The GPU ranks used {backend}, not NCCL."
    else:
        second = f"GPU training was not verified: {_no_gpu_reason(report)}."
    return f"{first} {second}"


def _static(report: Report, where: str) -> str:
    failed = report.failures()
    if failed:
        state = (
            f"{plural(len(failed), 'check')} will stop distributed training {where} "
            f"({listing([_what(r) for r in failed])})"
        )
    else:
        state = f"nothing found {where} stops distributed training"
    return (
        f"Static checks only: {state}. Nothing was launched, so training itself was not verified "
        "(run `ddp-doctor check` without --static)."
    )


def _what_ran(report: Report, live: LiveSection) -> str:
    world = int(live.get("world_size") or 0) or len(live.get("devices") or {}) or 1
    backend = BACKEND_WORDS.get(str(live.get("backend")), str(live.get("backend") or "?"))
    ranks = plural(world, f"{backend} rank")
    nnodes = str(live.get("nnodes") or "1")
    if nnodes != "1":
        ranks += f" on {count(nnodes, 'node')}"
    gpus = _gpu_names(live)
    if gpus:
        ranks += " on " + listing([f"{n} × {name}" for name, n in Counter(gpus).items()])
    phases = [p for p in _phases_run(live) if p in PHASE_WORDS]
    if phases:
        return f"{ranks} ran {listing([PHASE_WORDS[p] for p in phases], 8)}"
    return f"{ranks} ran the live chain"


def _gpu_names(live: LiveSection) -> list[str]:
    """One name per distinct GPU the ranks used (two ranks on one GPU count it once)."""
    seen: dict[str, str] = {}
    for rank, device in (live.get("devices") or {}).items():
        if isinstance(device, dict) and device.get("type") == "cuda":
            key = str(device.get("uuid") or device.get("pci_bus_id") or rank)
            seen.setdefault(key, str(device.get("name") or "GPU"))
    return list(seen.values())


def _no_gpu_reason(report: Report) -> str:
    gpus: GpuCount = report.facts.get("gpus") or GpuCount()
    torch: TorchBuild = report.facts.get("torch") or TorchBuild()
    count = int(gpus.get("count") or 0)
    if count == 0:
        return "no NVIDIA GPU is visible"
    if torch.get("flavour") == "cpu":
        return f"{plural(count, 'GPU')} {'is' if count == 1 else 'are'} visible, but torch is a CPU-only build"
    return f"{plural(count, 'GPU')} {'is' if count == 1 else 'are'} visible, but the ranks ran on CPU with gloo"


def _phases_run(live: LiveSection) -> list[str]:
    order: dict[str, None] = {}
    for phases in (live.get("phases") or {}).values():
        if isinstance(phases, dict):
            order.update(dict.fromkeys(phases))
    return list(order)


def _phases_passed(live: LiveSection) -> list[str]:
    per_rank = [p for p in (live.get("phases") or {}).values() if isinstance(p, dict)]
    return [name for name in _phases_run(live) if per_rank and all(p.get(name) == "pass" for p in per_rank)]


# ---- other commands ------------------------------------------------------------------------------


def _lint(report: Report) -> str:
    files: list[LintedFile] = report.facts.get("files") or []
    unreadable = [f for f in files if f.get("error")]
    findings = [r for r in report.results if r.id != "lint.input.unreadable" and r.status is not Status.SKIP]
    read = len(files) - len(unreadable)
    if not findings:
        text = f"No findings in {plural(read, 'file')}."
    else:
        text = f"{plural(len(findings), 'finding')} in {plural(read, 'file')}: {_tally(findings)}."
    if unreadable:
        text += (
            f" {plural(len(unreadable), 'file')} could not be read: {listing([str(f['file']) for f in unreadable])}."
        )
    return text


def _explain(report: Report) -> str:
    log: LogFacts = report.facts.get("log") or LogFacts()
    name = os.path.basename(str(report.target.get("file", "the log")))
    read = f"{plural(int(log.get('lines') or 0), 'line')} of {name}"
    failed = [r for r in report.results if r.status is Status.FAIL]
    if not failed:
        found = [r for r in report.results if r.status in (Status.WARN, Status.ERROR)]
        if found:
            # Not a healthy verdict: the headline leads with what may be wrong.
            also = f" ({plural(len(found) - 1, 'more warning')} below)" if len(found) > 1 else ""
            return f"No error in {read}, but {_may_be_wrong(found[0])}{also}."
        return f"No known failure signature in {read}."
    root = _root(report, failed)
    more = f" ({plural(len(failed) - 1, 'more failure')} found beside it)" if len(failed) > 1 else ""
    return f"Root cause{_on_rank(root)}: {_sentence(root.title)} Read {read}{more}."


def _may_be_wrong(r: Result) -> str:
    """What a warning of explain says may be wrong, as the end of a sentence."""
    if r.id == "diag.hang":
        # "the log ends during NCCL / process-group initialisation (line 40) with no error after it: if ..."
        where, _, _ = r.summary.partition(" with no error")
        where = re.sub(r" \(line (\d+)\)$", r" at line \1", where.rstrip(".;: "))
        return f"{where}: a hang, or only the start of the log"
    if r.id == "diag.unknown":
        return f"{r.summary.rstrip('.')} (not recognised as a failure; read it in context)"
    title = r.title.rstrip(".")
    return title if title[1:2].isupper() else f"{title[:1].lower()}{title[1:]}"  # keeps "NCCL ...", "IB ..."


def _bench(report: Report) -> str:
    ops = [r for r in report.results if r.metrics.get("peak_busbw_gbps") is not None]
    world = int(report.facts.get("world_size") or 0)
    backend = BACKEND_WORDS.get(str(report.facts.get("backend")), str(report.facts.get("backend") or ""))
    who = f" on {plural(world, f'{backend} rank')}" if world else ""
    if not ops:
        return _generic(report)
    best = max(ops, key=lambda r: r.metrics["peak_busbw_gbps"])
    problems = report.failures() + [r for r in report.results if r.status is Status.WARN]
    tail = f" Problems: {_tally(problems)}." if problems else ""
    return (
        f"Measured {plural(len(ops), 'collective')}{who}; the highest bus bandwidth was "
        f"{gbps(best.metrics['peak_busbw_gbps'])} GB/s ({best.id.removeprefix('bench.')}).{tail}"
    )


def _image(report: Report) -> str:
    name = os.path.basename(str(report.target.get("image", "")).rstrip("/")) or "the image"
    text = _generic(report)
    return f"Image {name}: {text[0].lower()}{text[1:]}"


def _generic(report: Report) -> str:
    failed = report.failures()
    warned = [r for r in report.results if r.status is Status.WARN]
    passed = sum(1 for r in report.results if r.status is Status.PASS)
    if failed:
        text = f"{plural(len(failed), 'check')} failed: {listing([_what(r) for r in failed])}"
        return text + (f"; {plural(len(warned), 'warning')}." if warned else ".")
    if warned:
        return f"No failures; {plural(len(warned), 'warning')}: {listing([_what(r) for r in warned])}."
    return f"No failures: {plural(passed, 'check')} passed."


def _run(report: Report) -> str:
    job = _first(report, "run.job")
    hang = _first(report, "run.hang")
    failure = _first(report, "run.failure")
    if hang is not None:
        return f"The job hung: {_sentence(hang.summary)}"
    if failure is not None and failure.rank is not None:
        return f"The job failed: {_rank_failure(report, failure)}"
    if failure is not None:
        exited = job.observed.get("exit_status") if job is not None else None
        signs = [r for r in report.failures() if r.id.startswith("diag.")]
        why = f" What the log shows: {_sentence(signs[0].title)}" if signs else ""
        return f"The job failed: the launcher exited {exited} and no rank reported its own error.{why}"
    if job is None:
        return _generic(report)
    if job.status is Status.WARN:
        return f"The job was interrupted: {_sentence(_job_words(job))}"
    warned = [r for r in report.results if r.status is Status.WARN]
    tail = f" {plural(len(warned), 'warning')}: {listing([_what(r) for r in warned])}." if warned else ""
    return f"The job ran to the end: {_sentence(_job_words(job))}{tail}"


def _rank_failure(report: Report, failure: Result) -> str:
    """'rank 1 raised ValueError: bad batch, in the training step (user code), 2.9 s after start.'"""
    phase = failure.phase or ""
    _, _, what = failure.summary.partition(f"in {phase}: ") if phase else ("", "", "")
    what = what or _unranked(failure.summary)
    known = phase and not phase.startswith("unknown")
    diagnosis = _first(report, str(failure.observed.get("diagnosis") or ""))
    verb = "raised" if failure.observed.get("end") == "exception" else "was" if what.startswith("killed") else "ended:"
    text = f"rank {failure.rank} {verb} {_first_sentence(what)}" + (f", in {phase}" if known else "")
    ended = re.search(r"\(([\d.]+ s after start)\)", failure.summary)
    text += f", {ended.group(1)}" if ended else ""
    return _sentence(text) + (f" {_sentence(diagnosis.title)}" if diagnosis is not None else "")


def _job_words(job: Result) -> str:
    """run.job's summary without the command line the report header already shows."""
    _, sep, rest = job.summary.partition(" exited ")
    return f"exited {rest}" if sep else job.summary


_BY_COMMAND: dict[str, Callable[[Report], str]] = {
    "run": _run,
    "check": _check,
    "lint": _lint,
    "explain": _explain,
    "bench": _bench,
    "image": _image,
}


# ---- helpers -------------------------------------------------------------------------------------


def _first(report: Report, id_: str) -> Result | None:
    return next((r for r in report.results if r.id == id_), None)


def _root(report: Report, candidates: list[Result]) -> Result:
    for r in candidates:
        if r.id == report.root_cause:
            return r
    return candidates[0]


def _what(r: Result) -> str:
    """What a check is called in a sentence: the phase as a person says it, else its title."""
    phase = r.phase or (r.id.split(".")[1] if r.id.startswith("live.") and r.id.count(".") >= 1 else None)
    if phase in PHASE_WORDS and r.id.count(".") == 1:
        return PHASE_WORDS[phase]
    return r.title[:1].lower() + r.title[1:] if r.title[:2] != r.title[:2].upper() else r.title


def root_words(report: Report) -> str:
    """The root cause in words for the line under the table: what failed, where, and how."""
    root = next((r for r in report.failures() if r.id == report.root_cause), None)
    root = root or next((r for r in report.results if r.id == report.root_cause), None)
    if root is None:
        return ""
    if root.id.startswith("diag."):  # a signature's title says what happened; its summary quotes the log
        return f"{root.title.rstrip('.')}{_on_rank(root)}"
    summary = _sentence(tidy_numbers(_unranked(root.summary))).rstrip(".")
    if root.rank is not None and summary.startswith(f"rank {root.rank} "):
        return summary
    return f"{_what(root)}{_on_rank(root)}: {summary}"


def _on_rank(r: Result) -> str:
    return f" on rank {r.rank}" if r.rank is not None else ""


def _unranked(summary: str) -> str:
    """'rank 1: dataloader failed ...' -> 'dataloader failed ...' (the sentence names the rank already)."""
    head, sep, tail = summary.partition(": ")
    return tail if sep and head.startswith("rank ") and head[5:].isdigit() else summary


_HEADLINE_EXCEPTION_CHARS = 160
"""Past this, an exception's message is cut to its first sentence: torch's messages run on for several
sentences and wrap mid-sentence ('... and by'), which would end the headline in the middle of a clause."""


def _first_sentence(what: str) -> str:
    """'RuntimeError: Expected to have finished reduction ... a new one. This error indicates ...' -> up to 'one'."""
    what = what.rstrip(".")
    if len(what) <= _HEADLINE_EXCEPTION_CHARS:
        return what
    head, sep, message = what.partition(": ")
    body = message if sep else what
    end = body.find(". ")
    if end > 0:
        body = body[:end]
    elif len(body) > _HEADLINE_EXCEPTION_CHARS:
        cut = body.rfind(" ", 0, _HEADLINE_EXCEPTION_CHARS)
        body = body[: cut if cut > 0 else _HEADLINE_EXCEPTION_CHARS].rstrip(",;:") + "…"
    return f"{head}: {body}" if sep else body


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    return text[:400] + ("…" if len(text) > 400 else "") + "."


def _tally(results: list[Result]) -> str:
    counts = Counter(r.status for r in results)
    words = {
        Status.FAIL: ("failure", "failures"),
        Status.ERROR: ("error", "errors"),
        Status.WARN: ("warning", "warnings"),
        Status.INFO: ("info", "info"),
        Status.PASS: ("pass", "passes"),
    }
    return ", ".join(plural(n, *words[s]) for s, n in counts.items() if s in words)
