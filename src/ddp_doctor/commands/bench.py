"""`ddp-doctor bench`: collective bandwidth sweeps with nccl-tests' numbers, GPU health, CI gates.

Dispatch and flag checks only; the work lives in bench/ (run.py starts the ranks through the
live chain's launcher, nccl_tests_import.py reads nccl-tests logs, baseline.py gates, plot.py draws).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ddp_doctor import progress
from ddp_doctor.bench import baseline, formulas, nccl_tests_import, plot
from ddp_doctor.bench import run as sweep_run
from ddp_doctor.bench.run import SweepSpec
from ddp_doctor.commands.check import add_target_arguments, resolve_target
from ddp_doctor.commands.options import (
    MAX_RANKS,
    Number,
    Size,
    add_output_arguments,
    add_oversubscribe_argument,
    count,
    seconds,
)
from ddp_doctor.env import target
from ddp_doctor.env.probes import gpu
from ddp_doctor.errors import UsageError
from ddp_doctor.live import capacity
from ddp_doctor.output import refuse_before_work
from ddp_doctor.report import Report
from ddp_doctor.words import plural

# Defaults that finish in well under a minute: 2 CPU ranks with gloo, or 8 GPUs with NCCL.
DEFAULT_MAX_BYTES = {"gloo": 4 << 20, "nccl": 1 << 30}
DEFAULT_MIN_BYTES = 1 << 10
# The largest message a flag takes; a rank holds about a dozen buffers of it (knowledge/rank_memory.yaml).
MESSAGE = Size(1, 16 << 30)


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


def add_arguments(parser: argparse.ArgumentParser) -> None:  # long: the flags written out, one table

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
        "--min-bytes", type=MESSAGE, default=DEFAULT_MIN_BYTES, metavar="B", help="smallest message (default: 1K)"
    )
    sweep.add_argument(
        "--max-bytes",
        type=MESSAGE,
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
    sweep.add_argument(
        "--iters", type=count("calls", 1, 100_000), default=20, metavar="N", help="timed calls per size (default: 20)"
    )
    sweep.add_argument(
        "--warmup-iters",
        type=count("calls", 0, 100_000),
        default=5,
        metavar="N",
        help="untimed calls per size (default: 5)",
    )
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
    ranks.add_argument(
        "--nproc",
        type=count("ranks", 1, MAX_RANKS),
        metavar="N",
        help="ranks, at most one per GPU with nccl and one per CPU core with gloo unless --oversubscribe "
        "(default: visible GPUs with nccl, else 2)",
    )
    add_oversubscribe_argument(ranks)
    ranks.add_argument("--backend", choices=["nccl", "gloo"], help="default: nccl with GPUs, else gloo")
    ranks.add_argument(
        "--timeout",
        type=seconds(),
        default=300.0,
        metavar="S",
        help="deadline for the whole run in seconds (default: 300)",
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
        type=Number("percent", 0, 99, above=True),
        default=10.0,
        metavar="PCT",
        help="with --baseline: fail when peak busbw drops more than this (default: 10)",
    )
    gates.add_argument(
        "--min-busbw",
        type=Number("GB/s", 0, 1_000_000),
        metavar="GBPS",
        help="fail when an op's peak busbw is below this",
    )
    gates.add_argument("--plot", metavar="FILE", help="busbw against size chart, .png or .svg (needs matplotlib)")
    add_output_arguments(parser)


def inputs(args: argparse.Namespace) -> list[str]:

    given = [args.baseline, args.import_file]
    return [p for p in given if p] + target.named_interpreters(args.python)


def _gpu_count() -> int:
    try:
        return int(gpu.probe().get("count") or 0)
    except Exception:  # noqa: BLE001 - no NVML: treat as no GPU, gloo on CPU
        return 0


def _validate(args: argparse.Namespace) -> None:
    if args.import_file and args.gpu_health:
        raise UsageError("--gpu-health measures this machine's GPUs, --import only reads a log: use one of them")
    if not args.ops and not args.gpu_health and not args.import_file:
        raise UsageError("--ops none measures nothing; add --gpu-health (GPU numbers only) or name some ops")
    if args.max_bytes is not None and args.max_bytes < args.min_bytes:
        raise UsageError(f"--min-bytes {args.min_bytes} / --max-bytes {args.max_bytes}: expected 1 <= min <= max")
    if args.plot:
        plot.check_path(args.plot)
        refuse_before_work(args.plot, [*inputs(args), *([args.output] if args.output else [])], "--plot")


def _measure(args: argparse.Namespace) -> Report:

    report = Report.for_host("bench")
    chosen = resolve_target(args, report)
    if chosen.source == "none":
        raise UsageError(f"{target.NOT_FOUND} (no torchrun and no python3/python with torch on PATH)")
    gpus = _gpu_count()
    backend = args.backend or ("nccl" if gpus else "gloo")
    if backend == "nccl" and not gpus:
        raise UsageError("--backend nccl needs a visible NVIDIA GPU and none was found (NVML); use --backend gloo")
    nproc = args.nproc or (gpus if backend == "nccl" else 2)
    max_bytes = args.max_bytes or max(args.min_bytes, DEFAULT_MAX_BYTES[backend])
    oversubscribe = args.oversubscribe or args.nproc is None
    capacity.refuse_beyond(nproc, backend, gpus, oversubscribe, capacity.for_bench(max_bytes))
    modes = {"inplace": (True,), "out_of_place": (False,), None: (False, True)}[args.mode]
    spec = SweepSpec(
        ops=tuple(args.ops),
        dtypes=tuple(args.dtype),
        min_bytes=args.min_bytes,
        max_bytes=max_bytes,
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

    beats = progress.Latest()
    shown = progress.Display(
        "bench", lambda: progress.bench_lines(beats.get(), "starting " + plural(nproc, f"{backend} rank"))
    )
    with progress.live(shown, progress.wanted(args.format, args.quiet, args.output)):
        return sweep_run.run(spec, report, on_poll=beats.set)


def run(args: argparse.Namespace) -> Report:
    _validate(args)
    base: Report | None = None
    if args.baseline:  # read before the sweep: an unreadable baseline must not cost a run
        base = baseline.load(args.baseline)
    if args.import_file:
        ops = tuple(args.ops)
        hint = ops[0] if len(ops) == 1 else None
        report = nccl_tests_import.import_report(args.import_file, hint)
    else:
        report = _measure(args)
    runs = [("this run", report)]
    if base is not None:
        report.extend(baseline.compare(report, base, args.baseline, args.max_regression / 100.0))
        runs.append(("baseline", base))
    if args.min_busbw is not None:
        report.extend(baseline.min_busbw(report, args.min_busbw))
    if args.plot:
        plot.write(args.plot, runs)
        report.facts["plot"] = args.plot
    return report
