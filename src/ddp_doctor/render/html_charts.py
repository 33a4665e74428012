"""Inline SVG for the HTML report: a timeline per rank and a utilisation chart per GPU.

Pure functions of the Report's facts (`facts.run` from `ddp-doctor run`, `facts.live.phase_times`
from `check`); no script, no external asset, every text escaped. Hover titles carry the numbers.
"""

from __future__ import annotations

import math
from html import escape
from typing import TypedDict, cast

from ddp_doctor.report import Report

WIDTH = 900
ROW_H = 22
LEFT = 90
_END_COLOUR = {"exit": "#1a7f37", "running": "#1a7f37", "exception": "#cf222e", "signal": "#cf222e", "gone": "#9a6700"}
PHASE_ORDER = ("init", "collectives", "dataloader", "sampler", "ddp", "balance", "gpu_health", "cluster")
"""The live chain's phases in the order they run (live/worker.py): the legend reads in this order."""
_PHASE_COLOURS = ("#0969da", "#8250df", "#bf8700", "#1a7f37", "#bf3989", "#57606a", "#0550ae", "#953800")
_FAILED_STROKE = "#cf222e"
_GPU_COLOURS = ("#0969da", "#bf3989", "#1a7f37", "#9a6700", "#8250df", "#cf222e", "#57606a", "#0550ae")


def _x(t: float, span: float) -> float:
    return LEFT + (WIDTH - LEFT - 10) * (t / span if span > 0 else 0.0)


def _svg_open(cls: str, label: str, height: int) -> str:
    return (
        f'<svg class="{cls}" role="img" aria-label="{label}" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg">'
    )


def ticks(span: float, most: int = 6) -> list[tuple[float, str]]:
    """Axis ticks at a round step (1, 2 or 5 times a power of ten) with as many decimals as the step
    needs, so no two labels read the same: 0 s, 0.5 s, 1 s, 1.5 s rather than 0 s, 0 s, 1 s, 1 s."""
    span = span if span > 0 else 1.0
    raw = span / (most - 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    count = int(span / step + 1e-9) + 1
    return [(i * step, f"{i * step:.{decimals}f} s") for i in range(count)]


def _axis(span: float, y: float) -> str:
    return "".join(
        f'<text class="tick" x="{_x(t, span):.1f}" y="{y:.0f}" font-size="10" text-anchor="middle">{label}</text>'
        for t, label in ticks(span)
    )


def rank_timeline(
    rows: list[tuple[str, list[tuple[float, float, str, str]]]],
    span: float,
    marks: list[tuple[float, str]],
    failed: set[tuple[int, int]] | None = None,
) -> str:
    """rows: (label, [(start_s, end_s, colour, title)]); marks: (t_s, title) drawn as red lines;
    failed: (row, bar) indices outlined in red."""
    height = ROW_H * len(rows) + 30
    parts = [_svg_open("timeline", "per-rank timeline", height)]
    for i, (label, bars) in enumerate(rows):
        y = i * ROW_H + 4
        parts.append(f'<text x="4" y="{y + 14}" font-size="12">{escape(label)}</text>')
        for j, (start, end, colour, title) in enumerate(bars):
            x0, x1 = _x(max(0.0, start), span), _x(max(start, end), span)
            outline = f' stroke="{_FAILED_STROKE}" stroke-width="2"' if failed and (i, j) in failed else ""
            parts.append(
                f'<rect x="{x0:.1f}" y="{y}" width="{max(1.5, x1 - x0):.1f}" height="{ROW_H - 6}" fill="{colour}" '
                f'opacity="0.85"{outline}><title>{escape(title)}</title></rect>'
            )
    for t, title in marks:
        x = _x(t, span)
        parts.append(
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height - 20}" stroke="#cf222e" stroke-width="2">'
            f"<title>{escape(title)}</title></line>"
        )
    parts.append(_axis(span, height - 6))
    parts.append("</svg>")
    return "".join(parts)


# The facts the charts read, as the report's JSON holds them: `run`'s (jobwatch) and `check`'s phase times.
class GpuSample(TypedDict, total=False):
    gpu: int
    t: float
    util_pct: float


class GpuTimeline(TypedDict, total=False):
    timeline: list[GpuSample]
    note: str


class RankSpan(TypedDict, total=False):
    started_s: float
    ended_s: float
    end: str
    detail: str


class StackJson(TypedDict, total=False):
    method: str
    text: str


class HungRankState(TypedDict, total=False):
    """One rank's entry in a hang's states, as the chart reads it."""

    state: str
    doing: str


class Hang(TypedDict, total=False):
    at_s: float
    kind: str
    message: str
    stacks: dict[str, StackJson]
    states: dict[str, HungRankState]


class RunFacts(TypedDict, total=False):
    duration_s: float
    ranks: dict[str, RankSpan]
    hangs: list[Hang]
    gpu: GpuTimeline


class PhaseTimeJson(TypedDict, total=False):
    name: str
    status: str
    started: float
    duration_s: float


class LivePhaseFacts(TypedDict, total=False):
    phase_times: dict[str, list[PhaseTimeJson]]
    """rank -> its phases in the order they ran."""


def gpu_chart(samples: list[GpuSample], span: float) -> str:
    height = 180
    plot_h = height - 30
    parts = [_svg_open("gpu-chart", "GPU utilisation", height)]
    for pct in (0, 50, 100):
        y = 5 + plot_h * (1 - pct / 100)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - 10}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{pct}%</text>')
    gpus = sorted({int(s["gpu"]) for s in samples})
    for gpu in gpus:
        pts = [(float(s["t"]), float(s["util_pct"])) for s in samples if s["gpu"] == gpu and "util_pct" in s]
        colour = _GPU_COLOURS[gpu % len(_GPU_COLOURS)]
        line = " ".join(f"{_x(t, span):.1f},{5 + plot_h * (1 - u / 100):.1f}" for t, u in pts)
        parts.append(
            f'<polyline class="gpu-line" fill="none" stroke="{colour}" stroke-width="1.5" points="{line}">'
            f"<title>GPU {gpu}</title></polyline>"
        )
        parts.append(f'<text x="4" y="{20 + 14 * gpu}" font-size="12" fill="{colour}">GPU {gpu}</text>')
    parts.append(_axis(span, height - 6))
    parts.append("</svg>")
    return "".join(parts)


def _run_sections(run: RunFacts) -> str:
    span = float(run.get("duration_s") or 0.0) or 1.0
    ranks = run.get("ranks") or dict[str, RankSpan]()
    rows = []
    for r, s in sorted(ranks.items(), key=lambda kv: int(kv[0])):
        end = str(s.get("end"))
        title = f"rank {r}: {s.get('started_s')} s to {s.get('ended_s')} s, {end}" + (
            f": {s['detail']}" if s.get("detail") else ""
        )
        rows.append(
            (
                f"rank {r}",
                [
                    (
                        float(s.get("started_s") or 0),
                        float(s.get("ended_s") or span),
                        _END_COLOUR.get(end, "#57606a"),
                        title,
                    )
                ],
            )
        )
    marks = [(float(h["at_s"]), f"hang: {h['message']}") for h in run.get("hangs") or []]
    out = ['<section class="run-timeline"><h2>Ranks over time</h2>']
    out.append(
        rank_timeline(rows, span, marks)
        if rows
        else "<p>No rank registered (no Python process of the job started the hook).</p>"
    )
    out.append("</section>")
    gpu = run.get("gpu") or GpuTimeline()
    out.append('<section class="gpu"><h2>GPU utilisation</h2>')
    if gpu.get("timeline"):
        out.append(gpu_chart(list(gpu["timeline"]), span))
    else:
        out.append(f'<p class="gpu-note">{escape(str(gpu.get("note") or "no GPU samples"))}</p>')
    out.append("</section>")
    for i, h in enumerate(run.get("hangs") or []):
        out.append(f'<section class="hang"><h2>Hang {i + 1} at {float(h["at_s"]):.0f} s: {escape(str(h["kind"]))}</h2>')
        out.append(f"<p>{escape(str(h['message']))}</p>")
        for r, st in sorted((h.get("stacks") or {}).items(), key=lambda kv: int(kv[0])):
            state = (h.get("states") or dict[str, HungRankState]()).get(r, HungRankState())
            out.append(
                f"<details open><summary>rank {escape(r)} ({escape(str(state.get('state', '?')))}: "
                f"{escape(str(state.get('doing', '')))}) — {escape(str(st.get('method')))}</summary>"
                f'<pre class="stack">{escape(str(st.get("text", "")))}</pre></details>'
            )
        out.append("</section>")
    return "".join(out)


def _check_sections(live: LivePhaseFacts) -> str:
    times = live.get("phase_times") or dict[str, list[PhaseTimeJson]]()
    starts = [float(p["started"]) for recs in times.values() for p in recs if p.get("started")]
    if not starts:
        return ""
    t0 = min(starts)
    span = (
        max(float(p["started"]) - t0 + float(p.get("duration_s") or 0) for recs in times.values() for p in recs) or 1.0
    )
    names = _phase_names(times)
    colour = {name: _PHASE_COLOURS[i % len(_PHASE_COLOURS)] for i, name in enumerate(names)}
    rows, failed = [], set()
    for i, (r, recs) in enumerate(sorted(times.items(), key=lambda kv: int(kv[0]))):
        bars = []
        for j, p in enumerate(recs):
            start = float(p["started"]) - t0
            dur = float(p.get("duration_s") or 0)
            if p.get("status") != "pass":
                failed.add((i, j))
            name = str(p.get("name"))
            bars.append((start, start + dur, colour[name], f"rank {r} {name}: {dur:.2f} s, {p.get('status')}"))
        rows.append((f"rank {r}", bars))
    legend = "".join(
        f'<span class="phase"><span class="swatch" style="background:{colour[n]}"></span>{escape(n)}</span>'
        for n in names
    )
    note = " A red outline marks a phase that did not pass." if failed else ""
    return (
        '<section class="phase-timeline"><h2>Phases per rank</h2>'
        f'<p class="legend">{legend}<span class="hint">Hover a bar for its duration.{note}</span></p>'
        + rank_timeline(rows, span, [], failed)
        + "</section>"
    )


def _phase_names(times: dict[str, list[PhaseTimeJson]]) -> list[str]:
    """Every phase that ran, in the chain's order (an unknown one after the known ones, as it ran)."""
    seen: dict[str, None] = {}
    for recs in times.values():
        seen.update(dict.fromkeys(str(p.get("name")) for p in recs))
    known = [n for n in PHASE_ORDER if n in seen]
    return known + [n for n in seen if n not in PHASE_ORDER]


def sections(report: Report) -> str:
    """The charts this report has facts for ('' when none)."""
    # The report's JSON, maybe from another version: the sections read each key with .get.
    run = report.facts.get("run")
    if isinstance(run, dict):
        return _run_sections(cast(RunFacts, run))
    live = report.facts.get("live")
    if isinstance(live, dict):
        return _check_sections(cast(LivePhaseFacts, live))
    return ""
