"""`ddp-doctor explain [FILE|-]`: name the cause of a failed distributed job from its log.

Reads torchrun / NCCL_DEBUG / kubectl logs output (plain, gzip or zstd; any size, in bounded
memory) and reports the root cause first, then the other findings, each with the lines that
prove it. Exit 1 when a failure signature matched, 0 when none, 2 when the input is unreadable.
"""

from __future__ import annotations

import argparse
import io
import os
import sys

from ddp_doctor.errors import UsageError
from ddp_doctor.report import Report, Result, Status
from ddp_doctor.words import plural

HELP = "explain why a distributed training job failed, from its log (FILE, or '-' for stdin)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ddp_doctor.commands.options import add_output_arguments

    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE|-",
        help="the log: torchrun, NCCL_DEBUG or kubectl logs output; .gz/.zst unpacked (default: stdin)",
    )
    add_output_arguments(parser)


def inputs(args: argparse.Namespace) -> list[str]:
    files = args.file if isinstance(args.file, list) else [args.file]
    return [f for f in files if f != "-"]


def run(args: argparse.Namespace) -> Report:
    from ddp_doctor.diagnose import Stats, explain_stream, notalog
    from ddp_doctor.diagnose.logread import open_log
    from ddp_doctor.diagnose.patterns import engine

    if args.file == "-" and sys.stdin.isatty():
        raise UsageError("no log given: pass a FILE, or pipe a log into 'ddp-doctor explain -'")
    notalog.refuse_path(args.file)
    stream, name = open_log(args.file)
    stats = Stats()
    from ddp_doctor import progress

    # A plain file's size is known; a compressed or piped log counts its unpacked bytes only.
    total = os.fstat(stream.fileno()).st_size if isinstance(stream, io.BufferedReader) and args.file != "-" else None
    shown = progress.Display("explain", lambda: progress.bytes_lines(stats.bytes_read, total, f"reading {name}"))
    try:
        with progress.live(shown, progress.wanted(args.format, args.quiet, args.output)):
            results = explain_stream(notalog.checked(stream, name), name, stats)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    report = Report(command="explain", target={"file": args.file if args.file != "-" else "stdin"})
    report.facts = {
        "log": {
            "name": name,
            "bytes": stats.bytes_read,
            "lines": stats.lines,
            "candidate_lines": stats.candidates,
            "regex_engine": engine().name,
        }
    }
    if not results:
        results = [
            Result(
                id="diag.none",
                title="No failure signature found",
                status=Status.PASS,
                summary=f"read {plural(stats.lines, 'line')}; none matches a known failure signature or looks like an error",
            )
        ]
    report.extend(results)
    report.root_cause = next((r.id for r in results if r.status is Status.FAIL), None)
    return report
