"""One module per CLI command (its help line is in cli.COMMANDS): add_arguments(parser), run(args) -> Report | Printed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Printed:
    """A command whose product is text rather than a Report (e.g. a generated config)."""

    text: str
    exit_code: int = 0
