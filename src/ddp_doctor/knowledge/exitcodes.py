"""Exit codes an orchestrator can act on (exitcodes.yaml): job failed / hang / infrastructure fault."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    data = yaml.safe_load((Path(__file__).with_name("exitcodes.yaml")).read_text(encoding="utf-8"))
    return dict(data)


def code(kind: str) -> int:
    return int(table()["codes"][kind]["code"])


def infrastructure_ids() -> frozenset[str]:
    return frozenset(str(e["id"]) for e in table()["infrastructure"])
