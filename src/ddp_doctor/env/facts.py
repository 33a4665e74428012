"""Placeholder: replaced by the static-checks work."""

from __future__ import annotations

import sys
from typing import Any


def gather() -> dict[str, Any]:
    return {"python": {"version": sys.version.split()[0], "executable": sys.executable}}
