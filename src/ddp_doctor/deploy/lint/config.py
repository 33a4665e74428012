"""Which lint rules a project has switched off: `--ignore`, `.ddp-doctor.toml` or pyproject.toml.

As ruff and mypy do, the nearest config file above the working directory wins:

    # .ddp-doctor.toml                      # pyproject.toml
    [lint]                                  [tool.ddp-doctor.lint]
    ignore = ["latest_tag", "lint.k8s.run_as_root"]

A name is a rule (`latest_tag`, every area) or a full id (`lint.k8s.latest_tag`, one area).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddp_doctor.deploy.lint.rules import catalogue, rule_ids
from ddp_doctor.errors import InputError
from ddp_doctor.inputfile import read_bounded

CONFIG_FILES = (".ddp-doctor.toml", "pyproject.toml")
MAX_CONFIG_BYTES = 16 << 20
"""A pyproject.toml is kilobytes; the bound keeps a device or a runaway file from being read whole."""


@dataclass(frozen=True)
class LintConfig:
    ignore: frozenset[str]
    source: str | None
    """The config file the ignore list came from (None: flags only)."""


def _load_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    raw = read_bounded(str(path), MAX_CONFIG_BYTES, "a TOML lint config", label="the lint config ")
    try:
        data: dict[str, Any] = tomllib.loads(raw.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError and TOMLDecodeError alike
        raise InputError(f"{path}: cannot read the lint config: {exc}") from None
    return data


def _ignored(path: Path) -> list[str] | None:
    """The ignore list of the file's lint section ([] when the section lists none); None when it has no
    lint section ([lint] of .ddp-doctor.toml, [tool.ddp-doctor.lint] of pyproject.toml)."""
    data = _load_toml(path)
    table = (
        data.get("lint") if path.name == ".ddp-doctor.toml" else data.get("tool", {}).get("ddp-doctor", {}).get("lint")
    )
    if not isinstance(table, dict):
        return None
    ignore = table.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(x, str) for x in ignore):
        raise InputError(f'{path}: lint ignore must be a list of rule names, e.g. ignore = ["latest_tag"]')
    return ignore


def find_config(start: Path) -> Path | None:
    for folder in [start, *start.parents]:
        for name in CONFIG_FILES:
            candidate = folder / name
            if candidate.is_file() and _ignored(candidate) is not None:
                return candidate
    return None


def known_names() -> set[str]:
    return set(catalogue()) | set(rule_ids())


def load(flags: list[str], config: str | None, cwd: Path) -> LintConfig:
    """--ignore values (comma-separated, repeatable) plus the config file's ignore list; unknown names are an error."""
    names = {n.strip() for flag in flags for n in flag.split(",") if n.strip()}
    path = Path(config) if config else find_config(cwd.resolve())
    if config and not Path(config).exists():
        raise InputError(f"{config}: no such lint config file")
    if path is not None:
        names |= set(_ignored(path) or [])
    unknown = sorted(names - known_names())
    if unknown:
        raise InputError(
            f"unknown lint rule {', '.join(unknown)}"
            + (f" (from {path})" if path else "")
            + "; expected a rule such as latest_tag or an id such as lint.k8s.latest_tag"
        )
    return LintConfig(frozenset(names), str(path) if path else None)
