"""`ddp-doctor bench`: collective bandwidth sweeps with nccl-tests' numbers, GPU health, CI gates.

Dispatch and flag checks only; the work lives in bench/ (run.py starts the ranks through the
live chain's launcher, nccl_tests_import.py reads nccl-tests logs, baseline.py gates, plot.py draws).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from ddp_doctor.bench import formulas
from ddp_doctor.errors import UsageError
from ddp_doctor.report import Report

HELP = "measure collective bandwidth (nccl-tests' algbw/busbw) and GPU health; gate CI on a baseline"

# Defaults that finish in well under a minute: 2 CPU ranks with gloo, or 8 GPUs with NCCL.
DEFAULT_MAX_BYTES = {"gloo": 4 << 20, "nccl": 1 << 30}
DEFAULT_MIN_BYTES = 1 << 10
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(i?[bB])?\s*$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    """'8', '64K', '16M', '1G' (powers of 1024, as nccl-tests -b/-e read them)."""
    m = _SIZE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; expected bytes like 1024, 64K, 16M or 1G")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _list(choices: tuple[str, ...], allow_none: bool = False) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(x.strip() for x in text.split(",") if x.strip())
        if items == ("all",):
            return choices
        if items == ("none",) and allow_none:
            return ()
        bad = [x for x in items if x not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{','.join(bad) or text!r}: choose from {','.join(choices)} (or all)")
        return tuple(dict.fromkeys(items))

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ddp_doctor.commands.check import add_target_arguments
    from ddp_doctor.commands.options import add_output_arguments

    add_target_arguments(parser)
    sweep = parser.add_argument_group("sweep")
    sweep.add_argument(
        "--ops",
        type=_list(formulas.OPS, allow_none=True),
        default=formulas.OPS,
        metavar="OP,...",
        help=f"collectives to measure: {','.join(formulas.OPS)} (default: all; none with "
        "--gpu-health for the GPU numbers alone)",
    )
    sweep.add_argument(
        "--min-bytes", type=parse_size, default=DEFAULT_MIN_BYTES, metavar="B", help="smallest message (default: 1K)"
    )
    sweep.add_argument(
        "--max-bytes",
        type=parse_size,
        metavar="B",
        help="largest message, doubling from --min-bytes (default: 4M with gloo, 1G with nccl)",
    )
    sweep.add_argument(
        "--dtype",
        type=_list(tuple(formulas.DTYPE_SIZE)),
        default=("fp32",),
        metavar="T,...",
        help="fp32,bf16,fp16 (default: fp32)",
    )
    mode = sweep.add_mutually_exclusive_group()
    mode.add_argument(
        "--inplace",
        dest="mode",
        action="store_const",
        const="inplace",
        help="only in-place calls (default: both where torch.distributed has both)",
    )
    mode.add_argument(
        "--out-of-place", dest="mode", action="store_const", const="out_of_place", help="only out-of-place calls"
    )
    sweep.add_argument("--iters", type=int, default=20, metavar="N", help="timed calls per size (default: 20)")
    sweep.add_argument("--warmup-iters", type=int, default=5, metavar="N", help="untimed calls per size (default: 5)")
    sweep.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="verify every result's values (default: on)",
    )
    sweep.add_argument(
        "--gpu-health",
        action="store_true",
        help="also measure each GPU: dense matmul TFLOP/s, memory and host copy bandwidth",
    )
    ranks = parser.add_argument_group("ranks")
    ranks.add_argument("--nproc", type=int, metavar="N", help="ranks (default: visible GPUs with nccl, else 2)")
    ranks.add_argument("--backend", choices=["nccl", "gloo"], help="default: nccl with GPUs, else gloo")
    ranks.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="deadline for the whole run in seconds (default: 300)"
    )
    gates = parser.add_argument_group("results and CI gates")
    gates.add_argument(
        "--import",
        dest="import_file",
        metavar="FILE",
        help="read an nccl-tests log (all_reduce_perf ...) instead of running; same JSON and gates",
    )
    gates.add_argument("--baseline", metavar="FILE", help="earlier bench JSON (or nccl-tests log) to compare with")
    gates.add_argument(
        "--max-regression",
        type=float,
        default=10.0,
        metavar="PCT",
        help="with --baseline: fail when peak busbw drops more than this (default: 10)",
    )
    gates.add_argument("--min-busbw", type=float, metavar="GBPS", help="fail when an op's peak busbw is below this")
    gates.add_argument("--plot", metavar="FILE", help="busbw against size chart, .png or .svg (needs matplotlib)")
    add_output_arguments(parser)


def _gpu_count() -> int:
    try:
        from ddp_doctor.env.probes import gpu

        return int(gpu.probe().get("count") or 0)
    except Exception:  # noqa: BLE001 - no NVML: treat as no GPU, gloo on CPU
        return 0


def _validate(args: argparse.Namespace) -> None:
    if args.import_file and args.gpu_health:
        raise UsageError("--gpu-health measures this machine's GPUs, --import only reads a log: use one of them")
    if not args.ops and not args.gpu_health and not args.import_file:
        raise UsageError("--ops none measures nothing; add --gpu-health (GPU numbers only) or name some ops")
    for name in ("iters", "warmup_iters"):
        if getattr(args, name) < (1 if name == "iters" else 0):
            raise UsageError(f"--{name.replace('_', '-')} {getattr(args, name)}: expected a positive number")
    if args.nproc is not None and args.nproc < 1:
        raise UsageError(f"--nproc {args.nproc}: expected at least 1")
    if args.timeout <= 0:
        raise UsageError(f"--timeout {args.timeout:g}: expected seconds > 0")
    if args.min_bytes < 1 or (args.max_bytes is not None and args.max_bytes < args.min_bytes):
        raise UsageError(f"--min-bytes {args.min_bytes} / --max-bytes {args.max_bytes}: expected 1 <= min <= max")
    if args.min_busbw is not None and args.min_busbw < 0:
        raise UsageError(f"--min-busbw {args.min_busbw:g}: expected GB/s >= 0")
    if not 0 < args.max_regression < 100:
        raise UsageError(f"--max-regression {args.max_regression:g}: expected a percentage between 0 and 100")
    if args.plot:
        from ddp_doctor.bench import plot

        plot.check_path(args.plot)


def _measure(args: argparse.Namespace) -> Report:
    from ddp_doctor.bench.run import SweepSpec, run
    from ddp_doctor.commands.check import resolve_target

    report = Report.for_host("bench")
    chosen = resolve_target(args, report)
    gpus = _gpu_count()
    backend = args.backend or ("nccl" if gpus else "gloo")
    if backend == "nccl" and not gpus:
        raise UsageError("--backend nccl needs a visible NVIDIA GPU and none was found (NVML); use --backend gloo")
    nproc = args.nproc or (gpus if backend == "nccl" else 2)
    if backend == "nccl" and nproc > gpus:
        raise UsageError(f"--nproc {nproc} with nccl needs {nproc} GPUs, {gpus} visible; one GPU per rank")
    modes = {"inplace": (True,), "out_of_place": (False,), None: (False, True)}[args.mode]
    spec = SweepSpec(
        ops=tuple(args.ops),
        dtypes=tuple(args.dtype),
        min_bytes=args.min_bytes,
        max_bytes=args.max_bytes or max(args.min_bytes, DEFAULT_MAX_BYTES[backend]),
        modes=modes,
        iters=args.iters,
        warmup_iters=args.warmup_iters,
        check=args.check,
        nproc=nproc,
        backend=backend,
        timeout_s=args.timeout,
        gpu_health=args.gpu_health,
        python=chosen.python,
    )
    from ddp_doctor import progress

    beats = progress.Latest()
    shown = progress.Display("bench", lambda: progress.bench_lines(beats.get(), f"starting {nproc} {backend} ranks"))
    with progress.live(shown, progress.wanted(args.format, args.quiet, args.output)):
        return run(spec, report, on_poll=beats.set)


def run(args: argparse.Namespace) -> Report:
    _validate(args)
    if args.import_file:
        from ddp_doctor.bench import nccl_tests_import

        ops = tuple(args.ops)
        hint = ops[0] if len(ops) == 1 else None
        report = nccl_tests_import.import_report(args.import_file, hint)
    else:
        report = _measure(args)
    runs = [("this run", report)]
    if args.baseline:
        from ddp_doctor.bench import baseline

        base = baseline.load(args.baseline)
        report.extend(baseline.compare(report, base, args.baseline, args.max_regression / 100.0))
        runs.append(("baseline", base))
    if args.min_busbw is not None:
        from ddp_doctor.bench import baseline

        report.extend(baseline.min_busbw(report, args.min_busbw))
    if args.plot:
        from ddp_doctor.bench import plot

        plot.write(args.plot, runs)
        report.facts["plot"] = args.plot
    return report
