from __future__ import annotations

import argparse
import json

from ddp_doctor.commands import Printed
from ddp_doctor.commands.options import add_output_arguments, text_width, use_color
from ddp_doctor.errors import InputError
from ddp_doctor.inputfile import read_bounded
from ddp_doctor.render import render
from ddp_doctor.render.headline import compose
from ddp_doctor.report import Report


def add_arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument("report", metavar="REPORT.json", help="a report written with --format json ('-' for stdin)")
    add_output_arguments(parser)


def inputs(args: argparse.Namespace) -> list[str]:
    return [args.report] if args.report != "-" else []


MAX_REPORT_BYTES = 256 << 20
"""A report of a 1000-rank run is a few MB; more is not a report, and reading it would be the machine's memory."""


def load_report(path: str) -> Report:

    data = read_bounded(path, MAX_REPORT_BYTES, "a report written with --format json")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not a ddp-doctor JSON report: not UTF-8 text (byte {exc.start})") from None
    try:
        return Report.from_dict(json.loads(text))
    except RecursionError:  # the JSON decoder's own limit: arrays or objects nested ~1000 deep
        raise InputError(f"{path} is not a ddp-doctor JSON report: it is nested too deeply to read") from None
    except ValueError as exc:
        raise InputError(f"{path} is not a ddp-doctor JSON report: {exc}") from None


def run(args: argparse.Namespace) -> Printed:

    # Rendered here, not by cli, so the saved timing and root cause stay as recorded.
    report = load_report(args.report)
    report.headline = report.headline or compose(report)  # a report saved before the field existed
    text = render(
        report, args.format, color=use_color(args.output), verbose=args.verbose, width=text_width(args.output)
    )
    return Printed(text, report.exit_code(args.strict))
