from __future__ import annotations

import importlib
import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ddp_doctor.render.labels import ICON, STYLE, VERDICT_STYLE, WORD, counts, needs_detail, target_line, where
from ddp_doctor.report import Report, Result

WIDTH = 140

# Reports that open with a section in their own shape: (module, function(report) -> str).
PREAMBLES = {"bench": ("ddp_doctor.bench.table", "render_tables")}


def _rank_cell(r: Result) -> str:
    if r.rank is None:
        return ""
    return f"{r.node}/{r.rank}" if r.node is not None else str(r.rank)


def render(report: Report, color: bool = False) -> str:
    buf = io.StringIO()
    if report.command in PREAMBLES:
        module, function = PREAMBLES[report.command]
        buf.write(getattr(importlib.import_module(module), function)(report))
    console = Console(file=buf, force_terminal=color, no_color=not color, width=WIDTH, highlight=False, soft_wrap=False)
    verdict = report.verdict().value
    console.print(
        Text.assemble(
            ("ddp-doctor ", "bold"),
            f"{report.command} — {target_line(report)} — verdict: ",
            (verdict.upper(), VERDICT_STYLE[verdict]),
            f"  ({counts(report)}; {report.duration_s:.1f} s)",
        )
    )
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    per_rank = any(r.rank is not None for r in report.results)
    if per_rank:
        table.add_column("rank", no_wrap=True)
    table.add_column("summary", overflow="fold", min_width=60)
    for r in report.results:
        label = Text(f"{ICON[r.status]} {WORD[r.status]}", style=STYLE[r.status])
        # Text(): "[rank 1]" in log lines is not rich markup.
        cells = [label, Text(r.id)] + ([Text(_rank_cell(r))] if per_rank else []) + [Text(r.summary)]
        table.add_row(*cells)
    console.print(table)
    details = [r for r in report.results if needs_detail(r)]
    if report.root_cause:
        console.print(Text.assemble("\nroot cause: ", (report.root_cause, "bold")))
    for r in details:
        console.print(
            Text.assemble("\n", (f"{ICON[r.status]} {WORD[r.status]} {r.id}", STYLE[r.status]), f" — {r.title}")
        )
        if where(r):
            console.print(f"  where:  {where(r)}", markup=False)
        if r.cause:
            console.print(f"  cause:  {r.cause}", markup=False)
        if r.remedy:
            console.print("  remedy: " + r.remedy.replace("\n", "\n          "), markup=False)
        for e in r.evidence[:5]:
            loc = f"{e.source}:{e.line}" if e.line is not None else e.source
            console.print(Text(f"  | {loc}: {e.text}", style="dim"))
    return buf.getvalue()
