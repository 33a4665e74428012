"""Renderers: each `render(report, color=...) -> str` is a pure function of the Report."""

from __future__ import annotations

import importlib

from ddp_doctor.report import Report

FORMATS = ("text", "json", "junit", "markdown", "html")
PIPED_WIDTH = 100
"""The text report's columns when it goes to no terminal (a file, a pipe, CI logs). Here, not in text.py,
so that commands/options can read it without importing rich."""


def render(report: Report, fmt: str, color: bool = False, verbose: bool = False, width: int | None = None) -> str:
    """`width`: the columns of the text report (None: the piped width); the other formats have none."""
    module = importlib.import_module(f"ddp_doctor.render.{fmt}")
    if fmt == "text":  # the only format that folds rows and is laid out for a terminal
        return str(module.render(report, color=color, verbose=verbose, width=width))
    return str(module.render(report, color=color))
