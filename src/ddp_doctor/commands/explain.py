"""`ddp-doctor explain [FILE|DIR|-]...`: name the cause of a failed distributed job from its logs.

Reads torchrun / NCCL_DEBUG / kubectl logs output (plain, gzip or zstd; any size, in bounded
memory) and reports the root cause first, then the other findings, each with the lines that
prove it. Several files, or directories of them (torchrun --log-dir, one log per pod or Slurm task, a
`ddp-doctor run` directory), are read as one job: each file's rank comes from its path, and the first
failure is the first by the logs' own times. Exit 1 when a failure signature matched, 0 when none, 2
when an input is unreadable.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import IO

from ddp_doctor import progress
from ddp_doctor.commands.options import add_output_arguments
from ddp_doctor.diagnose import Stats, explain_streams, notalog, sources
from ddp_doctor.diagnose.lines import Origin
from ddp_doctor.diagnose.logread import open_log
from ddp_doctor.diagnose.patterns import engine
from ddp_doctor.errors import InputError, UsageError
from ddp_doctor.report import Report, Result, Status, TargetJson
from ddp_doctor.words import listing, plural

LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
"""What a file in a directory must be named to be read as a log (also with .gz / .zst): torchrun's
stdout.log / stderr.log, Slurm's %t.out / .err, saved kubectl logs; its error.json and report JSON are not."""
MAX_FILES = 4096


def add_arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument(
        "file",
        nargs="*",
        default=["-"],
        metavar="FILE|DIR|-",
        help="the logs: torchrun, NCCL_DEBUG or kubectl logs output, one file or several (one per rank, pod or "
        "Slurm task), or directories of them (torchrun --log-dir, a `ddp-doctor run` directory); .gz/.zst "
        "unpacked (default: stdin)",
    )
    add_output_arguments(parser)


def _given(args: argparse.Namespace) -> list[str]:
    files = args.file if isinstance(args.file, list) else [args.file]
    return files or ["-"]


def inputs(args: argparse.Namespace) -> list[str]:
    return [f for f in _given(args) if f != "-"]


def _is_log_name(name: str) -> bool:
    for packed in (".gz", ".zst"):
        name = name.removesuffix(packed)
    return name.endswith(LOG_SUFFIXES)


def expand(given: list[str]) -> list[tuple[str, str]]:
    """(path to open, name it is reported and attributed by) for every log: a directory's logs in name order,
    named by their path below it (attempt_0/1/stderr.log keeps its local rank)."""
    if given.count("-") > 1 or ("-" in given and len(given) > 1):
        raise UsageError("'-' (stdin) is read alone, not with files")
    out: list[tuple[str, str]] = []
    for path in given:
        if path == "-" or not os.path.isdir(path):
            out.append((path, path if len(given) > 1 else os.path.basename(path)))
            continue
        found = []
        for root, dirs, files in os.walk(path):
            dirs.sort()
            # An empty file (a rank that printed nothing on stdout) has nothing to say: skipped, not refused.
            found += [
                os.path.join(root, f)
                for f in sorted(files)
                if _is_log_name(f) and os.path.isfile(os.path.join(root, f)) and os.path.getsize(os.path.join(root, f))
            ]
            if len(found) > MAX_FILES:
                raise InputError(f"{path} holds more than {MAX_FILES} log files; name the ones of one job")
        if not found:
            raise InputError(
                f"{path} is a directory with no non-empty log files in it (names ending in {', '.join(LOG_SUFFIXES)})"
            )
        out += [(f, os.path.relpath(f, path)) for f in found]
    return out


def run(args: argparse.Namespace) -> Report:
    given = _given(args)
    if given == ["-"] and sys.stdin.isatty():
        raise UsageError("no log given: pass a FILE, or pipe a log into 'ddp-doctor explain -'")
    logs = expand(given)
    for path, _ in logs:
        notalog.refuse_path(path)
    stats = Stats()
    results = _explain(args, given, logs, stats)
    names = [name for _, name in logs]
    if len(logs) == 1:
        target = TargetJson(file=given[0] if given[0] != "-" else "stdin")
    else:
        target = TargetJson(file=given[0] if len(given) == 1 else listing(given, limit=3))
    report = Report(command="explain", target=target)
    report.facts = {
        "log": {
            "name": names[0] if len(names) == 1 else listing(names, limit=3),
            "files": len(names),
            "paths": names,
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


def _explain(args: argparse.Namespace, given: list[str], logs: list[tuple[str, str]], stats: Stats) -> list[Result]:
    """Every log read once, in order, with the bytes read shown as progress."""
    origins = sources.origins([name for _, name in logs]) if len(logs) > 1 else {}
    # A plain file's size is known; a compressed or piped log counts its unpacked bytes only.
    plain = "-" not in given and not any(p.endswith((".gz", ".zst")) for p, _ in logs)
    total = sum(os.path.getsize(p) for p, _ in logs if os.path.isfile(p)) if plain else None
    what = logs[0][1] if len(logs) == 1 else plural(len(logs), "log")
    shown = progress.Display("explain", lambda: progress.bytes_lines(stats.bytes_read, total, f"reading {what}"))

    def opened() -> Iterator[tuple[IO[bytes], str, Origin | None]]:
        for path, name in logs:
            stream, shown_name = open_log(path)
            label = shown_name if len(logs) == 1 else name
            try:
                yield notalog.checked(stream, label), label, origins.get(name)
            finally:
                if stream is not sys.stdin.buffer:
                    stream.close()

    with progress.live(shown, progress.wanted(args.format, args.quiet, args.output)):
        return explain_streams(opened(), stats)
