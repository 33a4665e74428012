"""The text report: the headline, the verdict, one row per check, then every problem in full.

By default the rows are folded to fit one screen: a check that ran on every rank is one row
("2/2 ranks"), the passing sub-checks of a phase fold into the phase's row, and the skipped
checks share one row. `verbose` shows every rank's row and every sub-check.
"""

from __future__ import annotations

import importlib
import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ddp_doctor.render.folding import Row, fold, unfolded
from ddp_doctor.render.headline import headline
from ddp_doctor.render.labels import ICON, STYLE, VERDICT_STYLE, WORD, counts, needs_detail, target_line
from ddp_doctor.report import Report, Result
from ddp_doctor.words import tidy_numbers

WIDTH = 140

# Reports that open with a section in their own shape: (module, function(report) -> str).
PREAMBLES = {"bench": ("ddp_doctor.bench.table", "render_tables")}


def render(report: Report, color: bool = False, verbose: bool = False) -> str:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=color, no_color=not color, width=WIDTH, highlight=False, soft_wrap=False)
    console.print(Text(tidy_numbers(headline(report)), style="bold"))
    console.print()
    if report.command in PREAMBLES:
        module, function = PREAMBLES[report.command]
        buf.write(getattr(importlib.import_module(module), function)(report))
    verdict = report.verdict().value
    tally = counts(report)
    rows = unfolded(report) if verbose else fold(report)
    folded = (
        f"; {len(report.results)} results in {len(rows)} rows, -v shows each" if len(rows) < len(report.results) else ""
    )
    console.print(
        Text.assemble(
            ("ddp-doctor ", "bold"),
            f"{report.command} — {target_line(report)} — verdict: ",
            (verdict.upper(), VERDICT_STYLE[verdict]),
            f"  ({tally + '; ' if tally else ''}{report.duration_s:.1f} s{folded})",
        )
    )
    if rows:
        console.print(_table(rows))
    if report.root_cause:
        console.print(Text.assemble("\nroot cause: ", (report.root_cause, "bold")))
    for row in rows:
        for r, where in row.details:
            if needs_detail(r):
                _detail(console, r, where)
    return buf.getvalue()


def _table(rows: list[Row]) -> Table:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    if any(row.where for row in rows):
        table.add_column("where", no_wrap=True)
    table.add_column("summary", overflow="fold", min_width=60)
    with_where = len(table.columns) == 4
    for row in rows:
        label = Text(f"{ICON[row.status]} {WORD[row.status]}", style=STYLE[row.status])
        # Text(): "[rank 1]" in log lines is not rich markup.
        cells = [label, Text(row.id)] + ([Text(row.where)] if with_where else []) + [Text(tidy_numbers(row.summary))]
        table.add_row(*cells)
    return table


def _detail(console: Console, r: Result, where: str) -> None:
    console.print(Text.assemble("\n", (f"{ICON[r.status]} {WORD[r.status]} {r.id}", STYLE[r.status]), f" — {r.title}"))
    if where:
        console.print(f"  where:  {where}", markup=False)
    if r.cause:
        console.print(f"  cause:  {tidy_numbers(r.cause)}", markup=False)
    if r.remedy:
        console.print("  remedy: " + r.remedy.replace("\n", "\n          "), markup=False)
    for e in r.evidence[:5]:
        loc = f"{e.source}:{e.line}" if e.line is not None else e.source
        console.print(Text(f"  | {loc}: {e.text}", style="dim"))
