"""Status words and icons shared by the human-readable renderers (never colour alone)."""

from __future__ import annotations

from ddp_doctor.report import Report, Result, Status

ICON = {Status.PASS: "✔", Status.WARN: "!", Status.FAIL: "✘", Status.SKIP: "–", Status.ERROR: "?", Status.INFO: "i"}
WORD = {s: s.value.upper() for s in Status}
STYLE = {
    Status.PASS: "green",
    Status.WARN: "yellow",
    Status.FAIL: "bold red",
    Status.SKIP: "dim",
    Status.ERROR: "magenta",
    Status.INFO: "cyan",
}
VERDICT_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red"}


def where(result: Result) -> str:
    """'node a, rank 1, phase ddp' for per-rank results; '' otherwise."""
    parts = []
    if result.node is not None:
        parts.append(f"node {result.node}")
    if result.rank is not None:
        parts.append(f"rank {result.rank}")
    if result.phase:
        parts.append(f"phase {result.phase}")
    return ", ".join(parts)


def target_line(report: Report) -> str:
    return ", ".join(f"{k} {v}" for k, v in report.target.items())


def counts(report: Report) -> str:
    tally = {s: 0 for s in Status}
    for r in report.results:
        tally[r.status] += 1
    return ", ".join(f"{n} {s.value}" for s, n in tally.items() if n)


def needs_detail(result: Result) -> bool:
    # A passing result carries a remedy only on purpose (e.g. the command to run an image with).
    return result.status in (Status.WARN, Status.FAIL, Status.ERROR, Status.INFO) or bool(result.remedy)
