"""Status words and icons shared by the human-readable renderers (never colour alone)."""

from __future__ import annotations

from collections.abc import Sequence

from ddp_doctor.report import Report, Result, Status
from ddp_doctor.words import plural

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
SEVERITY = {Status.PASS: 0, Status.SKIP: 1, Status.INFO: 2, Status.WARN: 3, Status.ERROR: 4, Status.FAIL: 5}
_COUNT_WORDS = {
    Status.FAIL: ("failed", "failed"),
    Status.ERROR: ("error", "errors"),
    Status.WARN: ("warning", "warnings"),
    Status.PASS: ("passed", "passed"),
    Status.SKIP: ("skipped", "skipped"),
    Status.INFO: ("info", "info"),
}


def spans_nodes(results: Sequence[Result]) -> bool:
    """Whether the rank notation must name the node: the ranked results come from more than one."""
    return len({r.node for r in results if r.rank is not None or r.node is not None}) > 1


def rank_label(result: Result, with_node: bool = False) -> str:
    """The one rank notation of every command: 'rank 3', 'rank 3 on node-a', 'node-a', or ''."""
    if result.rank is None:
        return (result.node or "") if with_node else ""
    return f"rank {result.rank}" + (f" on {result.node}" if with_node and result.node else "")


def ranks_label(count: int, total: int) -> str:
    return f"{count}/{plural(total, 'rank')}"


def where(result: Result) -> str:
    """'rank 1 on a, phase ddp' for per-rank results; '' otherwise."""
    parts = []
    if result.rank is not None:
        parts.append(rank_label(result, with_node=True))
    elif result.node is not None:
        parts.append(f"node {result.node}")
    if result.phase:
        parts.append(f"phase {result.phase}")
    return ", ".join(parts)


def target_line(report: Report) -> str:
    return ", ".join(f"{k} {v}" for k, v in report.target.items())


def counts(report: Report) -> str:
    """'2 failed, 1 warning, 48 passed, 5 skipped' (worst first); '' for no results."""
    tally = {s: 0 for s in sorted(Status, key=lambda s: -SEVERITY.get(s, 0))}
    for r in report.results:
        tally[r.status] += 1
    return ", ".join(f"{n} {_COUNT_WORDS.get(s, (s.value, s.value))[n != 1]}" for s, n in tally.items() if n)


def needs_detail(result: Result) -> bool:
    # A passing result carries a remedy only on purpose (e.g. the command to run an image with).
    return result.status in (Status.WARN, Status.FAIL, Status.ERROR, Status.INFO) or bool(result.remedy)
