"""Fold a report's results into the rows a person reads on one screen.

- a check that ran on several ranks is one row, its status the worst of them, "2/2 ranks";
- the passing sub-checks of a check that is also in the report (`live.ddp.loss` under `live.ddp`)
  fold into that check's row;
- in `check` and `bench`, the skipped checks share one row (the headline says why they were skipped).

Nothing is dropped from the details: every warning, failure and error is still shown in full.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddp_doctor.render.labels import SEVERITY, rank_label, ranks_label, spans_nodes
from ddp_doctor.report import Report, Result, Status
from ddp_doctor.words import listing, plural

_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_RANK_PREFIX = re.compile(r"^rank \d+: ")
COLLAPSE_SKIPS = ("check", "bench")


@dataclass
class Row:
    status: Status
    id: str
    where: str
    summary: str
    details: list[tuple[Result, str]] = field(default_factory=list)
    """The results behind the row that a reader may need in full, each with where it happened."""


def unfolded(report: Report) -> list[Row]:
    nodes = spans_nodes(report.results)
    return [
        Row(r.status, r.id, rank_label(r, nodes), _without_rank(r), [(r, rank_label(r, nodes))]) for r in report.results
    ]


def _without_rank(r: Result) -> str:
    """The summary without its 'rank 0: ' when the where column already names that rank."""
    return r.summary.removeprefix(f"rank {r.rank}: ") if r.rank is not None else r.summary


def fold(report: Report) -> list[Row]:
    nodes = spans_nodes(report.results)
    total = _rank_count(report)
    groups: dict[str, list[Result]] = {}
    order: list[tuple[str, Result | None]] = []  # (group key, result for an unranked row)
    for r in report.results:
        if r.rank is None:
            order.append((r.id, r))
            continue
        if r.id not in groups:
            groups[r.id] = []
            order.append((r.id, None))
        groups[r.id].append(r)
    ids = {r.id for r in report.results}
    rows: list[Row] = []
    for key, single in order:
        members = [single] if single is not None else groups[key]
        if _parent(key, ids) is not None and all(m.status is Status.PASS for m in members):
            continue  # the parent's row counts it ("9 checks passed")
        rows.append(_row(key, members, single is None, total, nodes))
    return _collapse_skips(rows) if report.command in COLLAPSE_SKIPS else rows


def _row(key: str, members: list[Result], ranked: bool, total: int, nodes: bool) -> Row:
    worst = max(members, key=lambda m: SEVERITY.get(m.status, 0))
    if not ranked:
        return Row(
            worst.status, key, rank_label(worst, nodes), _without_rank(worst), [(worst, rank_label(worst, nodes))]
        )
    same = [m for m in members if m.status is worst.status]
    where = ranks_label(len(same), max(total, len(members))) if len(members) > 1 else rank_label(worst, nodes)
    summary = fold_summaries([m.summary for m in same]) or _without_rank(worst)
    return Row(worst.status, key, where, summary, _distinct_details(members, nodes))


def _distinct_details(members: list[Result], nodes: bool) -> list[tuple[Result, str]]:
    """One detail per distinct (status, cause, remedy), naming the ranks that share it."""
    by_text: dict[tuple[Status, str | None, str | None], list[Result]] = {}
    for m in members:
        by_text.setdefault((m.status, m.cause, m.remedy), []).append(m)
    out = []
    for same in by_text.values():
        where = listing([rank_label(m, nodes) for m in same], 8)
        out.append((same[0], where + (f", phase {same[0].phase}" if same[0].phase else "")))
    return out


def fold_summaries(summaries: list[str]) -> str | None:
    """'rank 0: 5 checks passed in 7.9 s' + 'rank 1: ... in 9.2 s' -> '5 checks passed in 7.9–9.2 s';
    None when the texts differ in more than their numbers."""
    texts = [_RANK_PREFIX.sub("", s) for s in summaries]
    if len(set(texts)) == 1:
        return texts[0]
    skeletons = {tuple(_NUMBER.split(t)) for t in texts}
    if len(skeletons) != 1:
        return None
    skeleton = skeletons.pop()
    columns = list(zip(*(_NUMBER.findall(t) for t in texts)))
    out = [skeleton[0]]
    for i, values in enumerate(columns):
        lo, hi = min(values, key=float), max(values, key=float)
        out.append(lo if float(lo) == float(hi) else f"{lo}–{hi}")
        out.append(skeleton[i + 1])
    return "".join(out)


def _parent(key: str, ids: set[str]) -> str | None:
    head, dot, _ = key.rpartition(".")
    return head if dot and head in ids else None


def _rank_count(report: Report) -> int:
    live = report.facts.get("live") or {}
    world = live.get("world_size") if isinstance(live, dict) else None
    if isinstance(world, int) and world > 0:
        return world
    return len({(r.node, r.rank) for r in report.results if r.rank is not None})


def _collapse_skips(rows: list[Row]) -> list[Row]:
    skipped = [row for row in rows if row.status is Status.SKIP]
    if len(skipped) < 2:
        return rows
    first = rows.index(skipped[0])
    kept = [row for row in rows if row.status is not Status.SKIP]
    merged = Row(Status.SKIP, plural(len(skipped), "check"), "", listing([row.id for row in skipped], 8) + " (-v: why)")
    kept.insert(first, merged)
    return kept
