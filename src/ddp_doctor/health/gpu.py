"""GPU health micro-benchmarks, and the judgement of their numbers against data sheets and peers.

Inside a rank (imports torch):
    run_health(device_index) -> dict        # everything below, for one GPU
    run_device_local(device_index) -> dict  # dense matmul TFLOP/s per dtype, device copy GB/s
    run_host_copies(device_index) -> dict   # pinned host->device and device->host GB/s

In the parent (no torch):
    evaluate(per_gpu, prefix="bench.gpu") -> [Result]   # spec table + stragglers
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, TypedDict

import yaml

from ddp_doctor.report import Result, Status
from ddp_doctor.words import plural

MATMUL_N = 8192
MATMUL_DTYPES = ("bf16", "fp16", "tf32", "fp32")
COPY_BYTES = 1 << 30
HOST_COPY_BYTES = 256 << 20


class GpuHealth(TypedDict, total=False):
    """One GPU's numbers as a rank writes them into its result file (JSON), read back by the parent."""

    rank: int
    device_index: int
    name: str
    memory_bytes: int
    uuid: str
    matmul_n: int
    matmul_tflops: dict[str, float]
    copy_gbps: float
    h2d_gbps: float
    d2h_gbps: float
    error: str
    """The micro-benchmark broke; the GPU's health is unknown."""
    skipped: str
    """Why it was not measured (no CUDA GPU in this rank)."""


class GpuSpec(TypedDict, total=False):
    """One entry of gpu_specs.yaml: a data sheet's dense peaks, with its source."""

    name: str
    match: str
    source: str
    bf16: float
    fp16: float
    tf32: float
    fp32: float
    memory_gbps: float
    host_link_gbps: float


class Specs(TypedDict):
    thresholds: dict[str, float]
    gpus: list[GpuSpec]


@dataclass(frozen=True)
class SpecRow:
    """One GPU's value of one metric against its data sheet (a result's `observed.per_gpu` entry)."""

    device_index: int | None
    name: str | None
    value: float
    spec: float | None
    spec_name: str | None
    ratio: float | None
    spec_source: str | None


@dataclass(frozen=True)
class GpuStraggler:
    """One GPU's metric that fell below its peers' median (a result's `observed.stragglers` entry)."""

    device_index: int | None
    name: str | None
    rank: int | None
    metric: str
    label: str
    value: float
    median: float
    unit: str
    below_pct: float


# ---- measuring (in a rank) ----------------------------------------------------------------


def _time_cuda_ms(torch: Any, fn: Any, iters: int, warmup: int, repeats: int = 3) -> float:
    """Milliseconds per call, CUDA events around `iters` queued calls; the best of `repeats`
    (clocks ramp up and other work can interrupt: the best run is the GPU's capability)."""
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        best = min(best, float(start.elapsed_time(end)) / iters)
    return best


def matmul_tflops(device_index: int, dtype: str, n: int = MATMUL_N, iters: int = 20, warmup: int = 10) -> float:
    import torch

    dev = torch.device("cuda", device_index)
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}[dtype]
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        a = torch.randn(n, n, device=dev, dtype=tdt)
        b = torch.randn(n, n, device=dev, dtype=tdt)
        c = torch.empty(n, n, device=dev, dtype=tdt)
        with torch.cuda.device(dev):
            ms = _time_cuda_ms(
                torch,
                lambda: torch.mm(a, b, out=c),
                iters if dtype != "fp32" else 5,
                warmup // 2 if dtype == "fp32" else warmup,
            )
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2.0 * n**3 / (ms / 1e3) / 1e12


def copy_gbps(device_index: int, nbytes: int = COPY_BYTES, iters: int = 20) -> float:
    """Device-to-device copy; counts bytes read plus bytes written, like STREAM's copy."""
    import torch

    dev = torch.device("cuda", device_index)
    free, _ = torch.cuda.mem_get_info(dev)
    nbytes = min(nbytes, max(1 << 20, free // 4))
    src = torch.empty(nbytes, dtype=torch.uint8, device=dev).fill_(1)
    dst = torch.empty_like(src)
    with torch.cuda.device(dev):
        ms = _time_cuda_ms(torch, lambda: dst.copy_(src), iters, 3)
    return 2.0 * nbytes / (ms / 1e3) / 1e9


def host_copy_gbps(device_index: int, direction: str, nbytes: int = HOST_COPY_BYTES, iters: int = 10) -> float:
    import torch

    dev = torch.device("cuda", device_index)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    gpu = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    if direction == "h2d":

        def fn() -> None:
            gpu.copy_(host, non_blocking=True)
    else:

        def fn() -> None:
            host.copy_(gpu, non_blocking=True)

    with torch.cuda.device(dev):
        ms = _time_cuda_ms(torch, fn, iters, 2)
    return nbytes / (ms / 1e3) / 1e9


def _identity(device_index: int) -> GpuHealth:
    import torch

    props = torch.cuda.get_device_properties(device_index)
    info: GpuHealth = {"device_index": device_index, "name": props.name, "memory_bytes": int(props.total_memory)}
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        info["uuid"] = str(uuid)
    return info


def run_device_local(device_index: int) -> GpuHealth:
    out = _identity(device_index)
    out["matmul_n"] = MATMUL_N
    out["matmul_tflops"] = {dt: round(matmul_tflops(device_index, dt), 2) for dt in MATMUL_DTYPES}
    out["copy_gbps"] = round(copy_gbps(device_index), 1)
    return out


def run_host_copies(device_index: int) -> GpuHealth:
    return {
        "h2d_gbps": round(host_copy_gbps(device_index, "h2d"), 2),
        "d2h_gbps": round(host_copy_gbps(device_index, "d2h"), 2),
    }


def run_health(device_index: int) -> GpuHealth:
    """All GPU health numbers of one GPU; the entry point for `check --gpu-health` ranks."""
    out = run_device_local(device_index)
    out.update(run_host_copies(device_index))
    return out


# ---- judging (in the parent) --------------------------------------------------------------


@lru_cache(maxsize=1)
def specs() -> Specs:
    text = resources.files("ddp_doctor.health").joinpath("gpu_specs.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict) and isinstance(data.get("gpus"), list)
    return Specs(thresholds=dict(data["thresholds"]), gpus=list(data["gpus"]))


def spec_for(name: str) -> GpuSpec | None:
    for entry in specs()["gpus"]:
        if re.search(entry["match"], name or ""):
            return GpuSpec(**entry)
    return None


# metric key -> (how to read it from a GPU's dict, spec key, threshold key, unit, label)
METRICS: dict[str, tuple[tuple[str, ...], str, str, str, str]] = {
    "matmul.bf16": (("matmul_tflops", "bf16"), "bf16", "matmul", "TFLOP/s", "bf16 matmul"),
    "matmul.fp16": (("matmul_tflops", "fp16"), "fp16", "matmul", "TFLOP/s", "fp16 matmul"),
    "matmul.tf32": (("matmul_tflops", "tf32"), "tf32", "matmul", "TFLOP/s", "tf32 matmul"),
    "matmul.fp32": (("matmul_tflops", "fp32"), "fp32", "matmul", "TFLOP/s", "fp32 matmul (no Tensor Cores)"),
    "copy": (("copy_gbps",), "memory_gbps", "memory", "GB/s", "device memory copy (read+write)"),
    "h2d": (("h2d_gbps",), "host_link_gbps", "host_link", "GB/s", "pinned host->device copy"),
    "d2h": (("d2h_gbps",), "host_link_gbps", "host_link", "GB/s", "pinned device->host copy"),
}
_UNIT_KEY = {"TFLOP/s": "tflops", "GB/s": "gbps"}


def _get(d: Mapping[str, object], path: tuple[str, ...]) -> float | None:
    value: object = d
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value) if isinstance(value, (int, float)) else None


def _label(gpu: GpuHealth | GpuStraggler) -> str:
    if isinstance(gpu, GpuStraggler):
        return f"GPU {gpu.device_index if gpu.device_index is not None else '?'} ({gpu.name or 'unknown'})"
    return f"GPU {gpu.get('device_index', '?')} ({gpu.get('name', 'unknown')})"


def evaluate(per_gpu: list[GpuHealth], prefix: str = "bench.gpu") -> list[Result]:
    """Each metric against the data sheet, then every GPU against its peers."""
    results: list[Result] = []
    broken = [g for g in per_gpu if g.get("error")]
    for g in broken:
        results.append(
            Result(
                f"{prefix}.gpu{g.get('device_index', g.get('rank'))}.error",
                "GPU health benchmark",
                Status.ERROR,
                f"{_label(g)}: the micro-benchmark failed: {g['error']}",
                cause="the benchmark itself could not run, so this GPU's health is unknown",
                remedy="run `nvidia-smi -q -i <index>` and look for Xid errors in `dmesg`; rerun with --gpu-health",
                observed={"gpu": g},
                rank=g.get("rank"),
            )
        )
    gpus = [g for g in per_gpu if not g.get("error") and not g.get("skipped")]
    if not gpus:
        if not broken:
            reason = next((g["skipped"] for g in per_gpu if g.get("skipped")), "no CUDA GPU was visible to the ranks")
            results.append(Result(f"{prefix}.health", "GPU health", Status.SKIP, f"not measured: {reason}"))
        return results
    thresholds = specs()["thresholds"]
    for key, (path, spec_key, threshold_key, unit, label) in METRICS.items():
        results.append(_against_spec(prefix, key, gpus, path, spec_key, thresholds[threshold_key], unit, label))
    results.append(_stragglers(prefix, gpus, float(thresholds["straggler"])))
    return results


def _spec_row(gpu: GpuHealth, value: float, spec_key: str) -> SpecRow:
    spec = spec_for(str(gpu.get("name", "")))
    peak = (_get(spec, (spec_key,)) if spec else None) or None
    return SpecRow(
        device_index=gpu.get("device_index"),
        name=gpu.get("name"),
        value=value,
        spec=peak,
        spec_name=spec["name"] if spec else None,
        ratio=value / peak if peak else None,
        spec_source=spec.get("source") if spec else None,
    )


def _against_spec(
    prefix: str,
    key: str,
    gpus: list[GpuHealth],
    path: tuple[str, ...],
    spec_key: str,
    fraction: float,
    unit: str,
    label: str,
) -> Result:
    rows = [_spec_row(g, value, spec_key) for g in gpus if (value := _get(g, path)) is not None]
    metrics = {f"gpu{r.device_index}_{key.replace('.', '_')}_{_UNIT_KEY[unit]}": round(r.value, 2) for r in rows}
    low = [r for r in rows if r.ratio is not None and r.ratio < fraction]
    unknown = [r for r in rows if r.ratio is None]
    rid, title = f"{prefix}.{key}", f"GPU {label}"
    if not rows:
        return Result(rid, title, Status.SKIP, "not measured")
    values = ", ".join(f"GPU {r.device_index} {r.value:.1f}" for r in rows)
    expected = {"fraction_of_spec": fraction}
    per_gpu = [asdict(r) for r in rows]
    if low:
        worst = min(low, key=lambda r: r.ratio or 0.0)
        return Result(
            rid,
            title,
            Status.WARN,
            f"{label}: GPU {worst.device_index} reached {worst.value:.1f} {unit}, "
            f"{worst.ratio or 0.0:.0%} of the {worst.spec_name} data-sheet {worst.spec or 0.0:g} {unit}; "
            f"expected at least {fraction:.0%}",
            cause="a healthy GPU of this model reaches more; typical causes are throttled clocks (power or "
            "thermal limit), a lower PCIe generation or width for host copies, or another process on the GPU",
            remedy="check `nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE -i <index>` for throttle reasons, "
            "`nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.width.current --format=csv`, and "
            "`nvidia-smi` for other processes",
            observed={"per_gpu": per_gpu},
            expected=expected,
            metrics=metrics,
        )
    if unknown and len(unknown) == len(rows):
        return Result(
            rid,
            title,
            Status.PASS,
            f"{label}: {values} {unit} (no data-sheet entry for {unknown[0].name}; peers compared below)",
            observed={"per_gpu": per_gpu},
            metrics=metrics,
        )
    ratios = ", ".join(f"{r.ratio:.0%}" for r in rows if r.ratio is not None)
    return Result(
        rid,
        title,
        Status.PASS,
        f"{label}: {values} {unit} ({ratios} of data sheet)",
        observed={"per_gpu": per_gpu},
        expected=expected,
        metrics=metrics,
    )


def _stragglers(prefix: str, gpus: list[GpuHealth], tolerance: float) -> Result:
    rid, title = f"{prefix}.straggler", "GPU straggler (against the other GPUs of this machine)"
    if len(gpus) < 2:
        return Result(rid, title, Status.SKIP, "one GPU: no peers to compare against")
    slow: list[GpuStraggler] = []
    for key, (path, _spec, _thr, unit, label) in METRICS.items():
        values = [(g, _get(g, path)) for g in gpus]
        present = [(g, v) for g, v in values if v is not None]
        if len(present) < 2:
            continue
        median = statistics.median(v for _, v in present)
        for g, v in present:
            if median > 0 and v < (1.0 - tolerance) * median:
                slow.append(
                    GpuStraggler(
                        device_index=g.get("device_index"),
                        name=g.get("name"),
                        rank=g.get("rank"),
                        metric=key,
                        label=label,
                        value=v,
                        median=median,
                        unit=unit,
                        below_pct=round(100 * (1 - v / median), 1),
                    )
                )
    if not slow:
        return Result(
            rid,
            title,
            Status.PASS,
            f"{plural(len(gpus), 'GPU')} within {tolerance:.0%} of each other on every metric",
            expected={"max_below_median": tolerance},
        )
    worst = max(slow, key=lambda s: s.below_pct)
    names = sorted({f"GPU {s.device_index}" for s in slow})
    return Result(
        rid,
        title,
        Status.FAIL,
        f"{', '.join(names)} below peers: {_label(worst)} {worst.label} {worst.value:.1f} {worst.unit}, "
        f"{worst.below_pct:.0f}% under the median {worst.median:.1f}; expected within {tolerance:.0%}",
        cause="DDP waits for the slowest rank at every gradient all-reduce, so one slow GPU slows every step of "
        "every rank",
        remedy="compare `nvidia-smi -q -d PERFORMANCE,CLOCK,POWER,TEMPERATURE` of the slow GPU with a healthy one "
        "(throttle reasons, clocks, temperature), check its PCIe link (`nvidia-smi --query-gpu="
        "pcie.link.gen.current,pcie.link.width.current --format=csv`); exclude it with CUDA_VISIBLE_DEVICES "
        "until it is fixed",
        observed={"stragglers": [asdict(s) for s in slow]},
        expected={"max_below_median": tolerance},
    )
