"""Sweep data -> Results: one per op (and dtype), the size points in `observed["points"]`.

Used for our own ranks' payloads and for imported nccl-tests logs alike, so both read the same.
"""

from __future__ import annotations

from importlib import resources
from typing import TypedDict

import yaml

from ddp_doctor.bench import formulas
from ddp_doctor.bench.records import OpEntry, Point
from ddp_doctor.report import Result, Status
from ddp_doctor.words import gbps, plural

TITLES = {
    "all_reduce": "all_reduce bandwidth",
    "all_gather": "all_gather bandwidth",
    "reduce_scatter": "reduce_scatter bandwidth",
    "broadcast": "broadcast bandwidth",
    "reduce": "reduce bandwidth",
    "all_to_all": "all_to_all bandwidth",
    "sendrecv": "send/recv bandwidth (ring of rank pairs)",
    "barrier": "barrier latency",
}


class LinkLimit(TypedDict):
    """One backend's entry of link_limits.yaml."""

    gbps: float
    what: str
    source: str


def result_id(op: str, dtype: str, several_dtypes: bool) -> str:
    return f"bench.{op}.{dtype}" if several_dtypes and op != "barrier" else f"bench.{op}"


def human_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def summary_metrics(op: str, points: list[Point]) -> dict[str, float]:
    if not points:
        return {}
    if op == "barrier":
        times = [float(p["time_us"]) for p in points]
        return {"latency_us": round(min(times), 3)}
    peak = max(points, key=lambda p: float(p["busbw_gbps"]))
    return {
        "peak_busbw_gbps": round(float(peak["busbw_gbps"]), 3),
        "peak_algbw_gbps": round(max(float(p["algbw_gbps"]) for p in points), 3),
        # nccl-tests' "# Avg bus bandwidth": the mean busbw over every printed point.
        "avg_busbw_gbps": round(sum(float(p["busbw_gbps"]) for p in points) / len(points), 3),
        "peak_busbw_bytes": int(peak["bytes"]),
    }


class OpObserved(TypedDict):
    """An op's Result.observed as the JSON report holds it (points_of and the baseline gates read it back)."""

    op: str
    dtype: str
    world_size: int | None
    backend: str | None
    redop: str
    """The reduction the op applies (formulas.REDOP): sum, or none for a copy."""
    source: str
    """Who measured it: ddp-doctor, or nccl-tests when read from its log."""
    points: list[Point]


def op_result(
    op: str,
    dtype: str,
    entry: OpEntry,
    *,
    several_dtypes: bool,
    world_size: int | None,
    backend: str | None,
    source: str = "ddp-doctor",
) -> Result:
    """One op's Result from {"status", "points", "reason"?, "error"?}."""
    rid = result_id(op, dtype, several_dtypes)
    title = f"{TITLES.get(op, op)} ({dtype})" if op != "barrier" else TITLES["barrier"]
    points = list(entry.get("points") or [])
    observed = OpObserved(
        op=op,
        dtype=dtype,
        world_size=world_size,
        backend=backend,
        redop=formulas.REDOP.get(op, "none"),
        source=source,
        points=points,
    )
    status = entry.get("status", "ok")
    if status == "unsupported":
        return Result(rid, title, Status.SKIP, f"not measured: {entry.get('reason')}", observed=dict(observed))
    if status == "error":
        return Result(
            rid,
            title,
            Status.ERROR,
            f"{op} raised during the sweep: {entry.get('error')}",
            cause="the collective itself failed, so its bandwidth is unknown",
            remedy="rerun with --ops " + op + " --max-bytes 1M to isolate it; the error above names the call",
            observed={**observed, "traceback": entry.get("traceback")},
        )
    if world_size == 1 and op != "barrier" and points:
        return _one_rank(rid, title, op, points, observed)
    if not points:
        return Result(
            rid,
            title,
            Status.SKIP,
            "no size in the sweep fits this op (sizes smaller than one element per rank)",
            observed=dict(observed),
        )
    return _measured(rid, title, op, points, observed, world_size, backend)


def _wrong_values(op: str, points: list[Point], wrong: list[Point]) -> str:
    first = min(wrong, key=lambda p: int(p["bytes"]))
    n_wrong = sum(int(p.get("wrong") or 0) for p in wrong)
    return (
        f"{op} returned wrong values at {len(wrong)} of {plural(len(points), 'point')} (first at {human_bytes(int(first['bytes']))}"
        f", {'in-place' if first.get('inplace') else 'out-of-place'}; {n_wrong} wrong elements in all); "
        f"expected exact results"
    )


def _measured(
    rid: str,
    title: str,
    op: str,
    points: list[Point],
    observed: OpObserved,
    world_size: int | None,
    backend: str | None,
) -> Result:
    """An op that ran at one size or more: wrong values, an impossible bandwidth, or its numbers."""
    metrics = summary_metrics(op, points)
    where = f"{plural(world_size, 'rank')}, {backend}" if world_size else (backend or "")
    wrong = [p for p in points if p.get("check_ok") is False]
    if op == "barrier":
        summary = f"{metrics['latency_us']:.1f} us per barrier ({where})"
    else:
        summary = (
            f"peak busbw {gbps(metrics['peak_busbw_gbps'])} GB/s at {human_bytes(int(metrics['peak_busbw_bytes']))}"
            f" (algbw {gbps(metrics['peak_algbw_gbps'])} GB/s; {where}; {plural(len(points), 'point')})"
        )
    checked = [p for p in points if p.get("check_ok") is not None]
    if wrong:
        return Result(
            rid,
            title,
            Status.FAIL,
            _wrong_values(op, points, wrong),
            cause="the collective delivered corrupted data: a broken transport (P2P/SHM/network), faulty GPU memory "
            "or a library bug; training on it silently diverges",
            remedy="rerun with NCCL_DEBUG=INFO; try NCCL_P2P_DISABLE=1 and then NCCL_SHM_DISABLE=1 to find the "
            "transport; run `ddp-doctor bench --gpu-health` and check `dmesg` for Xid errors",
            observed=dict(observed),
            metrics=metrics,
        )
    if op == "barrier":
        suffix = ""
    else:
        suffix = "; values checked" if checked and len(checked) == len(points) else "; values not checked"
        if world_size == 1:
            suffix += (
                "; with 1 rank nothing crosses a link (in-place calls do no work), so these are not "
                "interconnect numbers: use --nproc 2 or more"
            )
    limit = link_limit(backend)
    if op != "barrier" and limit is not None and metrics.get("peak_busbw_gbps", 0.0) > limit["gbps"]:
        return Result(
            rid,
            title,
            Status.WARN,
            f"invalid measurement: busbw {gbps(metrics['peak_busbw_gbps'])} GB/s at "
            f"{human_bytes(int(metrics['peak_busbw_bytes']))} is above the physical limit of any {backend} link "
            f"({limit['gbps']:g} GB/s: {limit['what']}); {summary}",
            cause="no link moves data that fast: the timing was wrong (calls not finished when the timer stopped) "
            "or the call moved nothing",
            remedy="rerun with more --iters and report the ddp-doctor version with this output",
            observed={**observed, "limit": limit},
            metrics=metrics,
        )
    return Result(rid, title, Status.PASS, summary + suffix, observed=dict(observed), metrics=metrics)


def link_limit(backend: str | None) -> LinkLimit | None:
    """The fastest any link of this backend moves data (bench/link_limits.yaml), or None."""
    text = resources.files(__package__).joinpath("link_limits.yaml").read_text(encoding="utf-8")
    limits = (yaml.safe_load(text) or {}).get("limits") or {}
    found = limits.get(backend or "")
    return (
        LinkLimit(gbps=float(found["gbps"]), what=str(found["what"]), source=str(found["source"]))
        if isinstance(found, dict)
        else None
    )


def _one_rank(rid: str, title: str, op: str, points: list[Point], observed: OpObserved) -> Result:
    """With one rank no byte crosses a link (an in-place all_reduce returns its input): a bandwidth
    figure would be a division by a call that did nothing, so none is reported."""
    times = [Point(bytes=p["bytes"], time_us=p["time_us"], inplace=p.get("inplace", False)) for p in points]
    slowest = max(times, key=lambda p: p["time_us"])
    return Result(
        rid,
        title,
        Status.SKIP,
        f"1 rank: nothing moves between devices, so no bandwidth is reported (a call took at most "
        f"{float(slowest['time_us']):.1f} us, at {human_bytes(int(slowest['bytes']))}); use --nproc 2 or more",
        observed={**observed, "points": [], "call_times": times},
    )


def points_of(result: Result) -> list[Point]:
    points = result.observed.get("points") if isinstance(result.observed, dict) else None
    return list(points) if isinstance(points, list) else []


def is_op_result(result: Result) -> bool:
    return result.id.startswith("bench.") and isinstance(result.observed, dict) and "points" in result.observed
