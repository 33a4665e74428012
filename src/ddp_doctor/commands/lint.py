"""`ddp-doctor lint FILE...`: the known DDP pitfalls in Kubernetes manifests, compose files,
Dockerfiles, docker/podman/torchrun scripts and Slurm batch scripts."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ddp_doctor.commands import Printed
from ddp_doctor.commands.options import add_output_arguments, text_width, use_color
from ddp_doctor.deploy.lint.config import load
from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.errors import EXIT_USAGE, DoctorError, InputError
from ddp_doctor.render import render
from ddp_doctor.render.headline import LintedFile
from ddp_doctor.render.headline import compose as compose_headline
from ddp_doctor.report import Evidence, Report, Result, Status, TargetJson
from ddp_doctor.words import listing

FORMATS = ("text", "json", "sarif")


def add_arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument("files", nargs="+", metavar="FILE", help="files to lint (kind told by name and content)")
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="RULE[,RULE]",
        help="skip these rules (latest_tag, or lint.k8s.latest_tag for one area); repeatable",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="lint config (default: the nearest .ddp-doctor.toml [lint] or pyproject.toml [tool.ddp-doctor.lint])",
    )
    add_output_arguments(parser, formats=FORMATS)


def inputs(args: argparse.Namespace) -> list[str]:
    return [*args.files, *([args.config] if args.config else [])]


def lint(paths: list[str], ignore: frozenset[str] = frozenset()) -> tuple[Report, list[str]]:
    """All files -> one Report, plus one message per file that could not be read."""

    target = TargetJson(file=paths[0]) if len(paths) == 1 else TargetJson(files=listing(paths, limit=3))
    report = Report(command="lint", target=target)
    unreadable: list[str] = []
    files: list[LintedFile] = []
    for path in paths:
        try:
            done = lint_file(path, ignore)
        except DoctorError as exc:
            unreadable.append(str(exc))
            report.add(
                Result(
                    id="lint.input.unreadable",
                    title="file not linted",
                    status=Status.ERROR,
                    summary=str(exc),
                    observed={"file": path},
                    remedy="pass a readable text config: a Kubernetes manifest, compose file, Dockerfile, "
                    "shell or Slurm script",
                    evidence=[Evidence(source=path, text=_without_path(str(exc), path), line=_line_of(str(exc)))],
                )
            )
            files.append(LintedFile(file=path, kind=None, error=str(exc)))
            continue
        report.extend(done.results)
        for note in done.notes:
            report.add(
                Result(
                    id=f"lint.{done.kind}.not_checked",
                    title="part of the file not checked",
                    status=Status.SKIP,
                    summary=note,
                    observed={"file": path},
                    evidence=[Evidence(source=path, text=note, line=_line_of(note))],
                )
            )
        files.append(LintedFile(file=path, kind=done.kind, units=len(done.units), findings=len(done.results)))
    report.facts = {"files": files}
    return report, unreadable


def _without_path(message: str, path: str) -> str:
    """'PATH:6: malformed YAML ...' -> 'malformed YAML ...' (the evidence names the source already)."""
    if not message.startswith(path):
        return message
    rest = message[len(path) :]
    head, sep, tail = rest.lstrip(":").partition(": ")
    return tail if sep and head.isdigit() else rest.lstrip(": ")


def _line_of(note: str) -> int | None:
    parts = note.split(":")
    return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else None


def run(args: argparse.Namespace) -> Printed:

    started = time.monotonic()
    config = load(list(args.ignore), args.config, Path.cwd())
    report, unreadable = lint(args.files, config.ignore)
    if config.ignore:
        report.facts["ignored_rules"] = sorted(config.ignore)
        report.facts["config"] = config.source
    report.finish(started)
    for message in unreadable[:-1] if len(unreadable) == len(args.files) else unreadable:
        print(f"ddp-doctor: error: {message}", file=sys.stderr)
    if unreadable and len(unreadable) == len(args.files):
        raise InputError(unreadable[-1])  # nothing was linted: an input error, not a report that says FAIL
    report.headline = compose_headline(report)
    text = render(
        report, args.format, color=use_color(args.output), verbose=args.verbose, width=text_width(args.output)
    )
    findings = [r for r in report.results if r.id != "lint.input.unreadable"]
    failed = any(r.status is Status.FAIL or (args.strict and r.status is Status.WARN) for r in findings)
    return Printed(text, EXIT_USAGE if unreadable else (1 if failed else 0))
