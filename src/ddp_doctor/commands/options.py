"""The output flags every report-producing command shares (cli renders with them)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ddp_doctor.render import FORMATS


def add_output_arguments(parser: argparse.ArgumentParser, formats: Sequence[str] = FORMATS) -> None:
    parser.add_argument("--format", choices=list(formats), default="text", help="report format (default: text)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument("--strict", action="store_true", help="treat warnings as failures (exit 1)")
    parser.add_argument("--verbose", "-v", action="store_true", help="text: every rank's row and every sub-check")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress display on stderr")


def use_color(output: str | None) -> bool:
    if "NO_COLOR" in os.environ or (output not in (None, "-")):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()
