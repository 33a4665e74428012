"""CI gates: compare with an earlier run (`--baseline FILE`) and a bandwidth floor (`--min-busbw`).

The baseline is a bench JSON report (ours or an imported nccl-tests log), or an nccl-tests log
itself. Results are matched by (op, dtype); sizes by (bytes, in-place). The compared number is
the peak busbw over the sizes both runs have: latency-bound small sizes are noisy, and a
regression at the sizes that matter for training shows in the peak. Barrier compares latency.
"""

from __future__ import annotations

import json

from ddp_doctor.bench import nccl_tests_import
from ddp_doctor.bench.records import Point
from ddp_doctor.bench.results import human_bytes, is_op_result, points_of
from ddp_doctor.errors import InputError
from ddp_doctor.inputfile import read_bounded
from ddp_doctor.report import Report, Result, Status
from ddp_doctor.words import gbps

DEFAULT_MAX_REGRESSION = 0.10
_EXPECTED = "the JSON of an earlier `ddp-doctor bench --format json` or an nccl-tests log"


def load(path: str) -> Report:
    text = read_bounded(path, nccl_tests_import.MAX_BYTES, _EXPECTED, label="baseline ").decode("utf-8", "replace")
    if text.lstrip().startswith("{"):
        try:
            report = Report.from_dict(json.loads(text))
        except RecursionError:
            raise InputError(f"baseline {path} is not a ddp-doctor report: it is nested too deeply to read") from None
        except ValueError as exc:
            raise InputError(f"baseline {path} is not a ddp-doctor report: {exc}") from None
        if report.command != "bench" or not any(is_op_result(r) for r in report.results):
            raise InputError(
                f"baseline {path} is a '{report.command}' report with no bench results; "
                "expected the JSON of an earlier `ddp-doctor bench --format json`"
            )
        return report
    return nccl_tests_import.import_report(path)


def _key(result: Result) -> tuple[str, str]:
    return str(result.observed.get("op")), str(result.observed.get("dtype"))


def _peak(points: list[Point], keys: set[tuple[int, bool]]) -> Point | None:
    chosen = [p for p in points if (int(p["bytes"]), bool(p.get("inplace"))) in keys]
    return max(chosen, key=lambda p: float(p["busbw_gbps"])) if chosen else None


def compare(
    current: Report, baseline: Report, baseline_path: str, max_regression: float = DEFAULT_MAX_REGRESSION
) -> list[Result]:
    by_key = {_key(r): r for r in baseline.results if is_op_result(r)}
    out: list[Result] = []
    for result in current.results:
        if not is_op_result(result) or result.status in (Status.SKIP, Status.ERROR):
            continue
        op, dtype = _key(result)
        rid = result.id.replace("bench.", "bench.baseline.", 1)
        title = f"{op} ({dtype}) against the baseline"
        base = by_key.get((op, dtype))
        if base is None:
            out.append(Result(rid, title, Status.SKIP, f"{baseline_path} has no {op} {dtype} result to compare with"))
            continue
        now_points, base_points = points_of(result), points_of(base)
        keys = {(int(p["bytes"]), bool(p.get("inplace"))) for p in now_points} & {
            (int(p["bytes"]), bool(p.get("inplace"))) for p in base_points
        }
        if not keys:
            out.append(
                Result(
                    rid,
                    title,
                    Status.SKIP,
                    f"no size in common with {baseline_path}; rerun with the baseline's --min-bytes/--max-bytes",
                )
            )
            continue
        out.append(
            _barrier(rid, title, now_points, base_points, keys, baseline_path, max_regression)
            if op == "barrier"
            else _bandwidth(rid, title, now_points, base_points, keys, baseline_path, max_regression, result, base)
        )
    return out


def _bandwidth(
    rid: str,
    title: str,
    now_points: list[Point],
    base_points: list[Point],
    keys: set[tuple[int, bool]],
    path: str,
    max_regression: float,
    result: Result,
    base: Result,
) -> Result:
    now, then = _peak(now_points, keys), _peak(base_points, keys)
    assert now is not None and then is not None
    now_bw, then_bw = float(now["busbw_gbps"]), float(then["busbw_gbps"])
    change = (now_bw - then_bw) / then_bw if then_bw > 0 else 0.0
    observed = {
        "peak_busbw_gbps": now_bw,
        "at_bytes": now["bytes"],
        "baseline_peak_busbw_gbps": then_bw,
        "baseline_at_bytes": then["bytes"],
        "common_points": len(keys),
        "world_size": result.observed.get("world_size"),
        "baseline_world_size": base.observed.get("world_size"),
        "baseline": path,
    }
    metrics = {"peak_busbw_gbps": now_bw, "baseline_peak_busbw_gbps": then_bw, "change_pct": round(100 * change, 2)}
    text = (
        f"peak busbw {gbps(now_bw)} GB/s at {human_bytes(int(now['bytes']))} vs baseline {gbps(then_bw)} GB/s at "
        f"{human_bytes(int(then['bytes']))} ({change:+.1%})"
    )
    if change < -max_regression:
        return Result(
            rid,
            title,
            Status.FAIL,
            f"{text}; expected no more than {max_regression:.0%} below the baseline",
            cause="the collective is slower than in the baseline run: a changed NCCL/driver/torch version, a "
            "transport falling back (NVLink/P2P or InfiniBand to sockets), other load, or a degraded link",
            remedy="rerun both with NCCL_DEBUG=INFO and compare the 'via P2P/IPC', 'via NET/IB' lines; check "
            "`ddp-doctor check` and `nvidia-smi topo -m`; accept the new numbers by replacing the baseline",
            observed=observed,
            expected={"max_regression": max_regression},
            metrics=metrics,
        )
    return Result(
        rid,
        title,
        Status.PASS,
        f"{text}; within {max_regression:.0%}",
        observed=observed,
        expected={"max_regression": max_regression},
        metrics=metrics,
    )


def _barrier(
    rid: str,
    title: str,
    now_points: list[Point],
    base_points: list[Point],
    keys: set[tuple[int, bool]],
    path: str,
    max_regression: float,
) -> Result:
    now = min(float(p["time_us"]) for p in now_points if (int(p["bytes"]), bool(p.get("inplace"))) in keys)
    then = min(float(p["time_us"]) for p in base_points if (int(p["bytes"]), bool(p.get("inplace"))) in keys)
    change = (now - then) / then if then > 0 else 0.0
    text = f"barrier {now:.1f} us vs baseline {then:.1f} us ({change:+.1%})"
    metrics = {"latency_us": now, "baseline_latency_us": then, "change_pct": round(100 * change, 2)}
    if change > max_regression:
        return Result(
            rid,
            title,
            Status.FAIL,
            f"{text}; expected no more than {max_regression:.0%} slower",
            cause="synchronisation between ranks got slower than in the baseline run",
            remedy="check for other load on the hosts and for a transport fallback (NCCL_DEBUG=INFO)",
            observed={"baseline": path},
            metrics=metrics,
        )
    return Result(
        rid, title, Status.PASS, f"{text}; within {max_regression:.0%}", observed={"baseline": path}, metrics=metrics
    )


def min_busbw(current: Report, floor_gbps: float) -> list[Result]:
    out: list[Result] = []
    for result in current.results:
        if not is_op_result(result) or result.observed.get("op") == "barrier":
            continue
        rid = result.id.replace("bench.", "bench.min_busbw.", 1)
        title = f"{result.observed.get('op')} ({result.observed.get('dtype')}) busbw floor"
        if result.status in (Status.SKIP, Status.ERROR) or "peak_busbw_gbps" not in result.metrics:
            out.append(Result(rid, title, Status.SKIP, f"not measured ({result.id} is {result.status.value})"))
            continue
        peak = float(result.metrics["peak_busbw_gbps"])
        at = human_bytes(int(result.metrics.get("peak_busbw_bytes", 0)))
        metrics = {"peak_busbw_gbps": peak, "min_busbw_gbps": floor_gbps}
        if peak < floor_gbps:
            one_rank = result.observed.get("world_size") == 1
            out.append(
                Result(
                    rid,
                    title,
                    Status.FAIL,
                    f"peak busbw {gbps(peak)} GB/s (at {at}) is below the required {floor_gbps:g} GB/s",
                    cause=(
                        "with one rank nothing crosses a link, so busbw is 0 by definition"
                        if one_rank
                        else "the interconnect delivers less than the floor: a transport fallback, a slow or degraded "
                        "link, or sizes too small to reach the peak"
                    ),
                    remedy="run with more ranks (--nproc)"
                    if one_rank
                    else "raise --max-bytes so the sweep reaches the bandwidth-bound sizes; rerun with NCCL_DEBUG=INFO "
                    "to see the transport; compare `nvidia-smi topo -m` and `ibstat` with the expected fabric",
                    observed={"at_bytes": result.metrics.get("peak_busbw_bytes")},
                    expected={"min_busbw_gbps": floor_gbps},
                    metrics=metrics,
                )
            )
        else:
            out.append(
                Result(
                    rid,
                    title,
                    Status.PASS,
                    f"peak busbw {gbps(peak)} GB/s (at {at}) >= {floor_gbps:g} GB/s",
                    expected={"min_busbw_gbps": floor_gbps},
                    metrics=metrics,
                )
            )
    return out
