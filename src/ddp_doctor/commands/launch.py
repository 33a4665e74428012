from __future__ import annotations

import argparse

from ddp_doctor.errors import UsageError
from ddp_doctor.report import Report

HELP = "(launch: not built yet)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> Report:
    raise UsageError("'launch' is not built yet")
