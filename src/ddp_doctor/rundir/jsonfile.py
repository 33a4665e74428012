"""JSON files that a killed writer can never leave half-written, and a reader that tolerates foreign ones."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_atomic(target: Path, data: str) -> None:
    """Replace target by a rename: a reader sees the old file or the new one, never half of one."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, target)


def read_object(p: Path) -> dict[str, Any] | None:
    """The JSON object in p; None when it is missing, torn, or not an object (a file nobody here wrote)."""
    try:
        value = json.loads(p.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def read_objects(files: dict[int, Path]) -> dict[int, dict[str, Any]]:
    """rank -> the JSON object of its file, leaving out the files that do not read as one."""
    out = {r: read_object(p) for r, p in files.items()}
    return {r: v for r, v in out.items() if v is not None}
