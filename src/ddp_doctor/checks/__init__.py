"""The checks: declared units over typed facts, shared by `check`, `image` and `lint`.

Adding a check: one module in checks/units/ declaring its `Check` (with its `order` in the report)
and its test; the registry finds it, docs/checks.md is generated from it (checks/docs.py), and
`registry.evaluate(subject)` runs it on a host, an image or a config.
"""

from __future__ import annotations

from ddp_doctor.checks.model import Check, Finding, Subject
from ddp_doctor.checks.registry import ALL, evaluate

__all__ = ["ALL", "Check", "Finding", "Subject", "evaluate"]
