"""`ddp-doctor check`: static facts and checks, then (unless --static) the live torchrun chain."""

from __future__ import annotations

import argparse

from ddp_doctor.report import Report

HELP = "check that this environment (or an image) really runs distributed PyTorch training"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ddp_doctor.cli import add_output_arguments

    parser.add_argument("--static", action="store_true", help="only the checks that need no ranks (about a second)")
    add_output_arguments(parser)


def run(args: argparse.Namespace) -> Report:
    from ddp_doctor.env import checks, facts

    report = Report.for_host("check")
    report.facts = facts.gather()
    report.extend(checks.evaluate(report.facts))
    return report
