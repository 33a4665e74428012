"""Text tables in the shape nccl-tests prints (src/common.cu, Reporter), one per op."""

from __future__ import annotations

import textwrap

from ddp_doctor.bench import formulas
from ddp_doctor.bench.records import Point
from ddp_doctor.bench.results import is_op_result, points_of
from ddp_doctor.report import Report, Result
from ddp_doctor.words import gbps, plural

ROOTED = ("broadcast", "reduce")


def _time(us: float) -> str:
    # nccl-tests: %7.0f from 10 ms, %7.1f from 100 us, else %7.2f
    if us >= 10000.0:
        return f"{us:7.0f}"
    if us >= 100.0:
        return f"{us:7.1f}"
    return f"{us:7.2f}"


def _cells(point: Point | None) -> str:
    if point is None:
        return f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>5}"
    wrong = point.get("wrong")
    wrong_text = "N/A" if wrong is None else str(int(wrong))
    return (
        f"  {_time(float(point['time_us']))}  {gbps(float(point['algbw_gbps'])):>6}  "
        f"{gbps(float(point['busbw_gbps'])):>6}  {wrong_text:>5}"
    )


HEADER = (
    "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place\n"
    "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} {:>6}\n"
    "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  {:>5}"
).format(
    "",
    "",
    "",
    "",
    "",
    "size",
    "count",
    "type",
    "redop",
    "root",
    "time",
    "algbw",
    "busbw",
    "#wrong",
    "time",
    "algbw",
    "busbw",
    "#wrong",
    "(B)",
    "(elements)",
    "",
    "",
    "",
    "(us)",
    "(GB/s)",
    "(GB/s)",
    "",
    "(us)",
    "(GB/s)",
    "(GB/s)",
    "",
)


FULL_WIDTH = 116
"""Columns of the whole table; a narrower screen drops the in-place half, then the element count."""
_IN_PLACE = slice(84, 116)
_COUNT = slice(14, 28)


def _fit(line: str, width: int) -> str:
    """One table line cut to `width` by whole columns (every table line shares the column positions)."""
    if width < FULL_WIDTH:
        line = line[: _IN_PLACE.start]
    if width < _IN_PLACE.start:
        line = line[: _COUNT.start] + line[_COUNT.stop :]
    return line.rstrip()


def _wrap(comment: str, width: int) -> list[str]:
    return textwrap.wrap(comment, width, subsequent_indent="#   ", break_on_hyphens=False) or [comment]


def render_result(result: Result, width: int = FULL_WIDTH) -> str:
    obs = result.observed
    op, dtype = str(obs.get("op")), str(obs.get("dtype"))
    points = points_of(result)
    world, backend = obs.get("world_size"), obs.get("backend")
    title = f"# {result.id}: {op}, {dtype}, {plural(int(world or 0), 'rank')}, {backend} (source: {obs.get('source')})"
    lines = _wrap(title, width)
    if not points:
        lines.extend(_wrap(f"#   {result.summary}", width))
        return "\n".join(lines)
    lines.extend(_fit(line, width) for line in HEADER.splitlines())
    rows: dict[int, dict[bool, Point]] = {}
    for p in points:
        rows.setdefault(int(p["bytes"]), {})[bool(p.get("inplace"))] = p
    type_name = formulas.NCCL_TYPE_NAME.get(dtype, dtype)
    redop = obs.get("redop") or formulas.REDOP.get(op, "none")
    root = 0 if op in ROOTED else -1
    for size in sorted(rows):
        pair = rows[size]
        count = int(next(iter(pair.values())).get("count", 0))
        row = f"{size:12d}  {count:12d}  {type_name:>8}  {redop:>6}  {root:6d}" + _cells(pair.get(False))
        lines.append(_fit(row + _cells(pair.get(True)), width))
    if op != "barrier":
        avg = sum(float(p["busbw_gbps"]) for p in points) / len(points)
        lines.append(f"# Avg bus bandwidth    : {avg:g}")
    return "\n".join(lines)


def render_tables(report: Report, width: int = FULL_WIDTH) -> str:
    blocks = [render_result(r, width) for r in report.results if is_op_result(r)]
    return "\n#\n".join(blocks) + ("\n\n" if blocks else "")
