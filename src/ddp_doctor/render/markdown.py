from __future__ import annotations

from ddp_doctor.render.headline import headline
from ddp_doctor.render.labels import ICON, WORD, counts, needs_detail, target_line, where
from ddp_doctor.report import Report
from ddp_doctor.words import tidy_numbers


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def render(report: Report, color: bool = False) -> str:
    verdict = report.verdict().value.upper()
    lines = [
        f"## ddp-doctor {report.command}: **{verdict}**",
        "",
        f"**{_cell(tidy_numbers(headline(report)))}**",
        "",
        f"{target_line(report)} · {counts(report)} · {report.duration_s:.1f} s · ddp-doctor {report.tool.get('version', '?')}",
        "",
    ]
    if report.root_cause:
        lines += [f"Root cause: `{report.root_cause}`", ""]
    lines += ["| status | check | summary |", "|---|---|---|"]
    for r in report.results:
        name = f"`{r.id}`" + (f" ({where(r)})" if where(r) else "")
        lines.append(f"| {ICON[r.status]} {WORD[r.status]} | {name} | {_cell(tidy_numbers(r.summary))} |")
    for r in (r for r in report.results if needs_detail(r)):
        lines += ["", f"### {WORD[r.status]} `{r.id}` — {r.title}", ""]
        if where(r):
            lines.append(f"- **where:** {where(r)}")
        if r.cause:
            lines.append(f"- **cause:** {r.cause}")
        if r.remedy:
            lines += ["- **remedy:**", "", "  ```", *("  " + x for x in r.remedy.splitlines()), "  ```"]
        if r.evidence:
            lines += ["", "  <details><summary>evidence</summary>", "", "  ```"]
            lines += [f"  {e.source}:{e.line if e.line is not None else '-'}: {e.text}" for e in r.evidence[:20]]
            lines += ["  ```", "  </details>"]
    return "\n".join(lines) + "\n"
