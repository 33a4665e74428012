"""Placeholder: replaced by the static-checks work."""

from __future__ import annotations

from typing import Any

from ddp_doctor.report import Result, Status


def evaluate(facts: dict[str, Any]) -> list[Result]:
    py = facts["python"]
    return [Result("env.python", "Python interpreter", Status.PASS, f"Python {py['version']} at {py['executable']}")]
