"""Read the text output of nccl-tests (`all_reduce_perf` and friends) into bench Results.

Handles the layouts nccl-tests printed over the years (src/common.cu and the per-op
print_header functions): with or without the `redop` and `root` columns, `#wrong` or the older
`error` column, in-place columns present or absent, `N/A` where a value is not checked, and
lines prefixed by mpirun (`[1,0]<stdout>:`) or by a rank tag (`[0]`). Several tables in one
file (e.g. every *_perf binary run in turn) give one Result each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ddp_doctor.bench import formulas
from ddp_doctor.bench.records import OpEntry, Point
from ddp_doctor.bench.results import op_result
from ddp_doctor.errors import InputError
from ddp_doctor.inputfile import read_bounded
from ddp_doctor.report import Report, Result, Status

MAX_BYTES = 64 << 20

_PREFIX = re.compile(r"\[\d+(?:,\d+)?\](?:<std(?:out|err)>)?:?")
_BINARY = re.compile(r"(?<![a-z])(" + "|".join(formulas.NCCL_TESTS_BINARIES) + r")(?:_mpi)?(?![a-z])")
_RANK_LINE = re.compile(r"^#\s*Rank\s+(\d+)\b.*?\bdevice\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")
_OOB = re.compile(r"#?\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
_PARAMS = re.compile(
    r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+).*?"
    r"warmup iters:\s*(\d+)\s+iters:\s*(\d+)"
)


@dataclass
class Table:
    op: str | None
    columns: list[str]
    groups: int
    wrong_kind: str  # "#wrong" or "error"
    line: int
    points: list[Point] = field(default_factory=list)
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    out_of_bounds_failed: bool = False


@dataclass
class Parsed:
    tables: list[Table]
    devices: dict[int, str]
    params: dict[str, int]


def _clean(line: str) -> str:
    return _PREFIX.sub("", line).rstrip()


def _is_header(tokens: list[str]) -> bool:
    return "size" in tokens and "count" in tokens and "time" in tokens and "algbw" in tokens


def _wrong(token: str, kind: str) -> tuple[int | None, bool | None, float | None]:
    """(wrong count, check_ok, old-style max error) from the last cell of a group."""
    flagged = token.endswith("*")
    token = token.rstrip("*")
    if token in ("N/A", "-1", ""):
        return None, None, None
    if kind == "#wrong":
        try:
            n = int(token)
        except ValueError:
            return None, None, None
        return n, n == 0, None
    try:
        err = float(token)
    except ValueError:
        return None, None, None
    # The old column is a max error that nccl-tests itself only judged in its "Out of bounds values"
    # line (it printed 1e+00 for unchecked in-place alltoall), so only a flagged cell is a failure.
    return None, False if flagged else None, err


def _row(tokens: list[str], table: Table) -> list[Point] | None:
    """The points of one table row (one per group: out of place, in place), or None for another line."""
    need = 4 * table.groups
    if len(tokens) < 3 + need or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    params, cells = tokens[:-need], tokens[-need:]
    raw_type = params[2]
    dtype = formulas.FROM_NCCL_TYPE.get(raw_type, raw_type)
    points: list[Point] = []
    for g in range(table.groups):
        time_s, algbw_s, busbw_s, wrong_s = cells[4 * g : 4 * g + 4]
        try:
            time_us, algbw, busbw = float(time_s), float(algbw_s), float(busbw_s)
        except ValueError:
            return None
        wrong, ok, err = _wrong(wrong_s, table.wrong_kind)
        point = Point(
            bytes=int(params[0]),
            count=int(params[1]),
            dtype=dtype,
            inplace=g == 1,
            time_us=time_us,
            algbw_gbps=algbw,
            busbw_gbps=busbw,
            wrong=wrong,
            check_ok=ok,
        )
        if err is not None:
            point["max_error"] = err
        points.append(point)
    return points


def parse(text: str, op_hint: str | None = None, default_op: str | None = None) -> Parsed:
    """`op_hint` (the user's --ops) wins; else the binary named in the log; else `default_op`."""
    tables: list[Table] = []
    devices: dict[int, str] = {}
    params: dict[str, int] = {}
    op = op_hint or default_op
    current: Table | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = _clean(raw)
        stripped = line.strip()
        if not stripped:
            continue
        m = _BINARY.search(stripped)
        if m and not op_hint and not stripped[:1].isdigit():
            op = formulas.NCCL_TESTS_BINARIES[m.group(1)]
        m = _RANK_LINE.match(stripped)
        if m:
            devices[int(m.group(1))] = m.group(2)
            continue
        m = _PARAMS.match(stripped)
        if m:
            params = dict(
                zip(
                    ("nthreads", "ngpus", "min_bytes", "max_bytes", "warmup_iters", "iters"),
                    (int(x) for x in m.groups()),
                )
            )
            continue
        m = _AVG.search(stripped)
        if m and current is not None:
            current.avg_busbw = float(m.group(1))
            continue
        m = _OOB.search(stripped)
        if m and current is not None:
            current.out_of_bounds = int(m.group(1))
            current.out_of_bounds_failed = m.group(2) == "FAILED"
            continue
        tokens = stripped.lstrip("#").split()
        if _is_header(tokens):
            columns = tokens[: tokens.index("time")]
            wrong_kind = "#wrong" if "#wrong" in tokens else "error"
            if current is not None and not current.points and current.columns == columns:
                continue  # the same header printed twice (several processes)
            current = Table(op, columns, max(1, tokens.count("time")), wrong_kind, number)
            tables.append(current)
            continue
        if current is not None and not stripped.startswith("#"):
            row = _row(stripped.split(), current)
            if row:
                current.points.extend(row)
    return Parsed([t for t in tables if t.points], devices, params)


def _world_size(parsed: Parsed, table: Table) -> int | None:
    if parsed.devices:
        return len(parsed.devices)
    # Without the "# Using devices" lines, busbw/algbw gives n: 2(n-1)/n for all_reduce, (n-1)/n for
    # all_gather, reduce_scatter and all_to_all (formulas.BUS_FACTOR).
    ratios = sorted(p["busbw_gbps"] / p["algbw_gbps"] for p in table.points if p["algbw_gbps"] >= 1.0)
    if not ratios:
        return None
    f = float(ratios[len(ratios) // 2])
    if table.op == "all_reduce" and 0.9 <= f < 1.99:
        return max(2, round(2.0 / (2.0 - f)))
    if table.op in ("all_gather", "reduce_scatter", "all_to_all") and 0.45 <= f < 0.995:
        return max(2, round(1.0 / (1.0 - f)))
    return None


def read_text(path: str) -> str:
    data = read_bounded(path, MAX_BYTES, "the text output of an nccl-tests run")
    if b"\0" in data[:65536]:
        raise InputError(
            f"{path} is a binary file; expected the text output of an nccl-tests run (all_reduce_perf ...)"
        )
    return data.decode("utf-8", "replace")


def to_results(parsed: Parsed, path: str) -> list[Result]:
    ops = [t.op or "unknown" for t in parsed.tables]
    results: list[Result] = []
    seen: dict[str, int] = {}
    for table in parsed.tables:
        op = table.op
        if op is None:
            raise InputError(
                f"{path}: found a result table at line {table.line} but not which collective it measured; keep the "
                "'# Collective test starting: <name>_perf' or command line in the file, or pass --ops <op>"
            )
        dtypes = sorted({p["dtype"] for p in table.points})
        several = len(dtypes) > 1 or sum(1 for o in ops if o == op) > 1
        world = _world_size(parsed, table)
        for dtype in dtypes:
            points = [p for p in table.points if p["dtype"] == dtype]
            r = op_result(
                op,
                dtype,
                OpEntry(status="ok", points=points),
                several_dtypes=several,
                world_size=world,
                backend="nccl",
                source="nccl-tests",
            )
            n = seen.get(r.id, 0)
            seen[r.id] = n + 1
            if n:
                r.id = f"{r.id}.{n + 1}"
            r.observed["nccl_tests"] = {
                "line": table.line,
                "avg_busbw_gbps": table.avg_busbw,
                "out_of_bounds": table.out_of_bounds,
                "params": parsed.params,
            }
            if table.out_of_bounds_failed and r.status is Status.PASS:
                r.status = Status.FAIL
                r.summary = (
                    f"nccl-tests reported {table.out_of_bounds} out-of-bounds values (FAILED); expected 0. {r.summary}"
                )
                r.cause = "nccl-tests found wrong values in the collective's output"
                r.remedy = (
                    "rerun with NCCL_DEBUG=INFO, then NCCL_P2P_DISABLE=1 / NCCL_SHM_DISABLE=1 to find the transport"
                )
            results.append(r)
    return results


def import_report(path: str, op_hint: str | None = None) -> Report:
    from_name = _BINARY.search(Path(path).name.replace("-", "_"))
    parsed = parse(read_text(path), op_hint, formulas.NCCL_TESTS_BINARIES[from_name.group(1)] if from_name else None)
    if not parsed.tables:
        raise InputError(
            f"no nccl-tests result table in {path}: expected a header like '#  size  count  type  redop  root  time  "
            "algbw  busbw  #wrong ...' followed by rows of numbers; is this the output of all_reduce_perf?"
        )
    report = Report(command="bench", target={"file": str(path)})
    report.extend(to_results(parsed, path))
    report.facts = {
        "source": "nccl-tests",
        "backend": "nccl",
        "world_size": _world_size(parsed, parsed.tables[0]),
        "devices": [{"rank": r, "name": n} for r, n in sorted(parsed.devices.items())],
        "nccl_tests_params": parsed.params,
    }
    return report
