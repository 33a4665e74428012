"""The checks: declared units over typed facts, shared by `check`, `image` and `lint`.

Adding a check: one module here with its judge and its Check declaration, one line in
registry.ALL, its facts in checks.facts, its test. docs/checks.md is generated from ALL
(checks/docs.py); `registry.evaluate(subject)` runs them on a host, an image or a config.
"""

from __future__ import annotations

from ddp_doctor.checks.model import Check, Finding, Subject
from ddp_doctor.checks.registry import ALL, evaluate

__all__ = ["ALL", "Check", "Finding", "Subject", "evaluate"]
