"""Release tables as data: torch releases <-> CUDA wheels <-> NCCL <-> archs, and driver floors.

The YAML files next to this module carry a source for each entry; this module only reads them.
"""

from __future__ import annotations

import copy
import functools
import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypedDict

from ddp_doctor.knowledge.arch import runs_on


class Release(TypedDict, total=False):
    """One torch release of torch_releases.yaml: what its official wheels support."""

    version: str
    python: list[str]
    cuda_variants: list[str]
    nccl: dict[str, str]
    """wheel variant -> the NCCL it bundles."""
    arch_list: dict[str, list[str]]
    """wheel variant -> the GPU archs it is built for."""
    source: str | None


class DriverFloor(TypedDict, total=False):
    """The drivers a CUDA runtime needs (cuda_drivers.yaml)."""

    cuda: str
    minor_compat: str
    """The oldest driver of the family that runs it under minor-version compatibility."""
    ga_driver: str | None
    """The driver the toolkit shipped with."""
    source: str


@functools.cache
def _load(name: str) -> dict[str, Any]:
    import yaml  # imported on first use, so it loads while the torch probe runs (see facts.gather)

    text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise TypeError(f"knowledge file {name} is not a mapping")
    return data


@functools.cache
def _releases() -> dict[str, Release]:
    return {
        str(key): Release(
            version=str(key),
            python=[str(p) for p in entry.get("python") or []],
            cuda_variants=[str(v) for v in entry.get("cuda_variants") or []],
            nccl={str(k): str(v) for k, v in (entry.get("nccl") or {}).items()},
            arch_list={str(k): [str(a) for a in v] for k, v in (entry.get("arch_list") or {}).items()},
            source=entry.get("source"),
        )
        for key, entry in _load("torch_releases.yaml")["releases"].items()
    }


def releases() -> dict[str, Release]:
    """torch release ('2.7') -> what its official wheels support."""
    return dict(_releases())


def newest_verified() -> str:
    return str(_load("torch_releases.yaml")["newest_verified"])


def release_key(torch_version: str) -> str | None:
    """'2.7.1+cu126' -> '2.7'; None when the string is not a torch version."""
    m = re.match(r"^(\d+)\.(\d+)", torch_version.strip())
    return f"{m.group(1)}.{m.group(2)}" if m else None


def release(torch_version: str) -> Release | None:
    key = release_key(torch_version)
    entry = _releases().get(key) if key else None
    # A copy: the caller may change it, the cached table stays as read.
    return None if entry is None else copy.deepcopy(entry)


def official_variants(torch_version: str) -> list[str] | None:
    rel = release(torch_version)
    return None if rel is None else rel["cuda_variants"]


def variant_of(cuda_version: str | None) -> str:
    """The wheel index name for a CUDA runtime: '12.6' -> 'cu126'; None -> 'cpu'."""
    if not cuda_version:
        return "cpu"
    parts = cuda_version.split(".")
    return f"cu{parts[0]}{parts[1] if len(parts) > 1 else '0'}"


def cuda_of(variant: str) -> str | None:
    """'cu126' -> '12.6'; 'cpu' -> None."""
    m = re.fullmatch(r"cu(\d+)(\d)", variant)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def index_url(variant: str) -> str:
    return str(_load("torch_releases.yaml")["index_url"]).format(variant=variant)


def install_command(torch_version: str | None, variant: str, python: str | None = None) -> str:
    """The pip command that installs an official wheel into this interpreter's environment."""
    spec = f"torch=={torch_version}" if torch_version else "torch"
    return f"{python or sys.executable} -m pip install '{spec}' --index-url {index_url(variant)}"


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def driver_floor(cuda_version: str) -> DriverFloor | None:
    """Driver floors for a CUDA runtime '12.6': minor-compat floor of its family and its GA driver."""
    data = _load("cuda_drivers.yaml")
    parts = cuda_version.split(".")
    family = data["families"].get(parts[0])
    if family is None:
        return None
    toolkit = data["toolkits"].get(".".join(parts[:2])) or {}
    return DriverFloor(
        cuda=".".join(parts[:2]),
        minor_compat=str(family["minor_compat"]),
        ga_driver=toolkit.get("ga_driver"),
        source="; ".join(s for s in (family.get("source"), toolkit.get("source")) if s),
    )


def load_mapping(name: str) -> dict[str, Any]:
    """A whole knowledge file (a mapping), e.g. variables.yaml."""
    return _load(name)


def variants_supporting(torch_version: str, sm: str) -> list[str]:
    """Official variants of this release whose recorded arch list runs an `sm_XY` GPU."""

    rel = release(torch_version)
    if rel is None:
        return []
    return [v for v, archs in rel["arch_list"].items() if runs_on(sm, archs)]


@dataclass(frozen=True)
class ImportErrorRule:
    """One entry of import_errors.yaml: words of an `import torch` error, their cause and the remedy."""

    match: tuple[str, ...]
    cause: str
    remedy: str
    """With {python} and {install} for the check to fill in."""


@functools.cache
def import_errors() -> tuple[ImportErrorRule, ...]:
    """import_errors.yaml's rules, first match wins."""
    return tuple(
        ImportErrorRule(tuple(str(m) for m in e["match"]), str(e["cause"]), str(e["remedy"]))
        for e in _load("import_errors.yaml")["patterns"]
    )
