"""The text report: the headline, the verdict, one row per check, then every problem in full.

By default the rows are folded to fit one screen: a check that ran on every rank is one row
("2/2 ranks"), the passing sub-checks of a phase fold into the phase's row, and the skipped
checks share one row. `verbose` shows every rank's row and every sub-check.

Laid out for `width` columns (the terminal's, or PIPED_WIDTH when the output is not a terminal):
words wrap at spaces, continuation lines are indented under their column, and no line ends in
spaces. Where the summary column would be narrower than MIN_SUMMARY, each row's summary goes on
the lines below its status and check.
"""

from __future__ import annotations

import importlib
import io
import re

from rich.console import Console
from rich.text import Text

from ddp_doctor.render import PIPED_WIDTH
from ddp_doctor.render.folding import Row, fold, unfolded
from ddp_doctor.render.headline import headline, root_words
from ddp_doctor.render.labels import ICON, STYLE, VERDICT_STYLE, WORD, counts, needs_detail, target_line
from ddp_doctor.report import Report, Result
from ddp_doctor.words import tidy_numbers

MIN_WIDTH, MAX_WIDTH = 40, 250
MIN_SUMMARY = 48
"""Below this many columns for the summary a table row reads as a column of words: stack instead."""
GAP = "  "
LABEL = 10  # "  remedy: "

# Reports that open with a section in their own shape: (module, function(report, width) -> str).
PREAMBLES = {"bench": ("ddp_doctor.bench.table", "render_tables")}


def render(report: Report, color: bool = False, verbose: bool = False, width: int | None = None) -> str:
    width = max(MIN_WIDTH, min(MAX_WIDTH, width or PIPED_WIDTH))
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=color, no_color=not color, width=width, highlight=False, soft_wrap=True)
    out = _Screen(console, width)
    out.para(Text(tidy_numbers(headline(report)), style="bold"))
    out.blank()
    if report.command in PREAMBLES:
        module, function = PREAMBLES[report.command]
        out.raw(getattr(importlib.import_module(module), function)(report, width))
    verdict = report.verdict().value
    tally = counts(report)
    rows = unfolded(report) if verbose else fold(report)
    folded = "; -v shows every rank and sub-check" if len(rows) < len(report.results) else ""
    out.para(
        Text.assemble(
            ("ddp-doctor ", "bold"),
            f"{report.command} — {target_line(report)} — verdict: ",
            (verdict.upper(), VERDICT_STYLE[verdict]),
            f"  ({tally + '; ' if tally else ''}{report.duration_s:.1f} s{folded})",
        )
    )
    if rows:
        _table(out, rows)
    root = root_words(report)
    if root:  # the id to find its detail block below, then what happened in words
        out.blank()
        out.para(Text.assemble("root cause: ", (f"{report.root_cause} — {root}", "bold")), indent=len("root cause: "))
    for row in rows:
        for r, where in row.details:
            if needs_detail(r) and (r.cause or r.remedy or r.evidence or where):
                _detail(out, r, where)
    return _strip_trailing(buf.getvalue())


class _Screen:
    """Writes wrapped lines to the console; styles survive the wrapping (rich's Text.wrap)."""

    def __init__(self, console: Console, width: int) -> None:
        self.console, self.width = console, width

    def blank(self) -> None:
        self.console.print()

    def raw(self, text: str) -> None:
        self.console.file.write(text)

    def para(self, text: Text, indent: int = 0, first: str | Text = "", width: int | None = None) -> None:
        """`first` then `text` wrapped to `width`; the lines after the first indented by `indent`."""
        width = width or self.width
        head = first if isinstance(first, Text) else Text(first)
        lines = text.wrap(self.console, max(10, width - max(indent, head.cell_len)), overflow="fold")
        if not lines:
            self.console.print(head)
        for i, line in enumerate(lines):
            lead = head if i == 0 else Text(" " * indent)
            self.console.print(Text.assemble(lead, line))


def _table(out: _Screen, rows: list[Row]) -> None:
    labels = [Text(f"{ICON[r.status]} {WORD[r.status]}", style=STYLE[r.status]) for r in rows]
    status_w = max(len("status"), *(t.cell_len for t in labels))
    check_w = max(len("check"), *(len(r.id) for r in rows))
    where_w = max([len(r.where) for r in rows if r.where] or [0])
    columns = [("status", status_w), ("check", check_w)] + ([("where", where_w)] if where_w else [])
    left = sum(w for _, w in columns) + len(GAP) * len(columns)
    stacked = out.width - left < MIN_SUMMARY
    header = GAP.join(name.ljust(w) for name, w in columns)
    out.console.print(Text(header if stacked else header + GAP + "summary", style="bold"))
    for row, label in zip(rows, labels):
        cells = [Text.assemble(label, " " * (status_w - label.cell_len)), Text(row.id.ljust(check_w))]
        if where_w:
            cells.append(Text(row.where.ljust(where_w)))
        lead = Text(GAP).join(cells) + Text(GAP)
        summary = Text(tidy_numbers(row.summary))
        longest = max((len(w) for w in summary.plain.split()), default=0)
        if stacked or longest > out.width - left:  # a path the column would cut: the row's own lines
            out.console.print(lead)
            out.para(summary, indent=status_w + len(GAP), first=" " * (status_w + len(GAP)))
        else:
            out.para(summary, indent=left, first=lead)


def _detail(out: _Screen, r: Result, where: str) -> None:
    out.blank()
    title = Text.assemble((f"{ICON[r.status]} {WORD[r.status]} {r.id}", STYLE[r.status]), f" — {r.title}")
    out.para(title, indent=4)
    if where:
        out.para(Text(where), indent=LABEL, first="  where:  ")
    if r.cause:
        out.para(Text(tidy_numbers(r.cause)), indent=LABEL, first="  cause:  ")
    if r.remedy:
        for i, line in enumerate(remedy_lines(r.remedy)):
            # a remedy's own lines (commands, Dockerfile lines) keep their indent; one that is too long
            # wraps two columns further in, so its rest does not read as the next command
            own = len(line) - len(line.lstrip(" "))
            first = "  remedy: " if i == 0 else " " * LABEL
            out.para(Text(line.lstrip(" ")), indent=LABEL + own + (2 if i else 0), first=first + " " * own)
    for e in r.evidence[:5]:
        loc = f"{e.source}:{e.line}" if e.line is not None else e.source
        out.para(Text(f"{loc}: {e.text}", style="dim"), indent=6, first=Text("  | ", style="dim"))


def remedy_lines(remedy: str) -> list[str]:
    """A remedy's lines as the screen shows them. Prose its author broke at some width ('... test
    the' + 'fabric: nccl-tests ...') is one line again, rewrapped for this screen; every other line
    (commands, 'Kubernetes: ...', indented blocks) stays a line of its own."""
    lines: list[str] = []
    for line in remedy.splitlines() or [""]:
        prev = lines[-1] if lines else ""
        if _continues(prev, line):
            lines[-1] = f"{prev} {line}"
        else:
            lines.append(line)
    return lines


def _continues(prev: str, line: str) -> bool:
    """A sentence broken mid-way: a long unindented line ending in a word or comma, then a word in
    lower case (not a command: those are indented or follow a colon)."""
    return (
        len(prev) >= 50
        and prev[:1].strip() != ""
        and (prev[-1].isalnum() or prev[-1] == ",")
        and line[:1].islower()
        and not line.startswith(("docker ", "kubectl ", "export ", "pip ", "torchrun ", "srun ", "python"))
    )


_TRAILING = re.compile(r"(?:[ \t]|\x1b\[[0-9;]*m)+$")


def _strip_trailing(text: str) -> str:
    """No line ends in spaces (a table's padding, an empty cell), with or without colour codes."""

    def strip(line: str) -> str:
        tail = _TRAILING.search(line)
        if tail is None:
            return line
        codes = "\x1b[0m" if "\x1b[" in tail.group(0) else ""
        return line[: tail.start()] + codes

    return "\n".join(strip(line) for line in text.split("\n"))
