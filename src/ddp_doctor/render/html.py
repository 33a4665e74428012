"""A self-contained HTML page: no scripts, no external assets, every value escaped."""

from __future__ import annotations

from html import escape

from ddp_doctor.render.headline import headline, root_words
from ddp_doctor.render.html_charts import sections
from ddp_doctor.render.labels import ICON, WORD, counts, target_line, where
from ddp_doctor.report import Report
from ddp_doctor.words import tidy_numbers

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:72em;color:#222}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.35em .6em;text-align:left;vertical-align:top}
.pass{color:#1a7f37}.warn{color:#9a6700}.fail{color:#cf222e;font-weight:bold}.skip{color:#777}.error{color:#8250df}.info{color:#0969da}
code,pre{background:#f6f8fa;padding:.1em .3em}pre{padding:.6em;white-space:pre-wrap}
details{margin:.3em 0 .8em}
td,p{overflow-wrap:anywhere}tr>td:first-child,tr>th:first-child{white-space:nowrap}
svg{max-width:100%;height:auto}
.legend .phase{margin-right:1em;white-space:nowrap}.legend .swatch{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:-.1em}
.legend .hint{color:#57606a}
"""


def render(report: Report, color: bool = False) -> str:
    verdict = report.verdict().value
    rows = []
    for r in report.results:
        detail = ""
        if r.cause or r.remedy or r.evidence:
            inner = ""
            if where(r):
                inner += f"<p><b>where:</b> {escape(where(r))}</p>"
            if r.cause:
                inner += f"<p><b>cause:</b> {escape(r.cause)}</p>"
            if r.remedy:
                inner += f"<p><b>remedy:</b></p><pre>{escape(r.remedy)}</pre>"
            if r.evidence:
                ev = "\n".join(f"{e.source}:{e.line if e.line is not None else '-'}: {e.text}" for e in r.evidence[:50])
                inner += f"<pre>{escape(ev)}</pre>"
            detail = f"<details><summary>details</summary>{inner}</details>"
        rows.append(
            f'<tr><td class="{r.status.value}">{ICON[r.status]} {WORD[r.status]}</td>'
            f"<td><code>{escape(r.id)}</code></td><td>{escape(tidy_numbers(r.summary))}{detail}</td></tr>"
        )
    root_cause = root_words(report)
    root = (
        f'<p class="root-cause"><b>Root cause:</b> <code>{escape(str(report.root_cause))}</code> — {escape(root_cause)}</p>'
        if root_cause
        else ""
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>ddp-doctor {escape(report.command)}: {verdict.upper()}</title><style>{_CSS}</style></head><body>"
        f'<h1>ddp-doctor {escape(report.command)}: <span class="{verdict}">{verdict.upper()}</span></h1>'
        f'<p class="headline"><strong>{escape(tidy_numbers(headline(report)))}</strong></p>'
        f"<p>{escape(target_line(report))} · {escape(counts(report))} · {report.duration_s:.1f} s · {escape(report.started)}</p>"
        f"{root}{sections(report)}<table><tr><th>status</th><th>check</th><th>summary</th></tr>{''.join(rows)}</table>"
        "</body></html>\n"
    )
