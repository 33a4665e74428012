# Runs inside the *target* interpreter (`PYTHON -c <this source>`), which may be another
# environment than the doctor's own, with none of the doctor's dependencies: standard library
# only, Python 3.8 syntax. It never imports torch (that is torch_child.py's job); it reads what
# the target's own import system and package metadata say, and prints one JSON object.
# The doctor's own interpreter imports this module and calls collect() instead.
from __future__ import annotations

import json
import os
import platform
import re
import sys
from pathlib import Path
from typing import TypedDict

NCCL_PACKAGES = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
_VERSION_FIELD = re.compile(r"^(__version__|cuda|hip|git_version)\s*(?::[^=]*)?=\s*(.+)$", re.MULTILINE)


def _literal(text: str) -> str | None:
    text = text.strip()
    if text in ("None", ""):
        return None
    m = re.match(r"""^(['"])(.*)\1""", text)
    return m.group(2) if m else None


def read_version_file(torch_dir: Path) -> dict[str, str | None]:
    """torch/version.py holds the build's __version__, cuda, hip and git_version as literals."""
    try:
        text = (torch_dir / "version.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return {m.group(1): _literal(m.group(2)) for m in _VERSION_FIELD.finditer(text)}


def _nccl_pin(requires: list[str] | None) -> str | None:
    for req in requires or []:
        m = re.match(r"^\s*(nvidia-nccl-cu\d+)\s*==\s*([\w.]+)", req)
        if m:
            return f"{m.group(1)}=={m.group(2)}"
    return None


class PythonJson(TypedDict):
    """An interpreter: facts["python"] of the report (checks/facts reads it)."""

    version: str
    implementation: str
    executable: str
    prefix: str
    base_prefix: str
    venv: bool
    conda_env: str | None


def python_facts() -> PythonJson:
    prefix = sys.prefix
    conda = os.environ.get("CONDA_DEFAULT_ENV")
    if conda is None and Path(prefix, "conda-meta").is_dir():
        conda = Path(prefix).name
    return PythonJson(
        version=platform.python_version(),
        implementation=platform.python_implementation(),
        executable=sys.executable,
        prefix=prefix,
        base_prefix=sys.base_prefix,
        venv=sys.prefix != sys.base_prefix,
        conda_env=conda,
    )


class TorchMetadata(TypedDict, total=False):
    """torch as its files say, without importing it."""

    installed: bool
    version: str | None
    location: str | None
    cuda: str | None
    hip: str | None
    git_version: str | None
    nccl_requirement: str | None
    """The nvidia-nccl-cu* pin in torch's Requires-Dist."""
    distribution: str | None
    build_version: str | None
    """torch/version.py's __version__."""


class InterpreterFacts(TypedDict):
    """What this module prints as JSON when run in the target interpreter."""

    python: PythonJson
    torch: TorchMetadata
    nccl_packages: list[list[str]]
    """[source, path] of each libnccl.so an nvidia-nccl package installed."""


def torch_metadata() -> TorchMetadata:
    """What can be known about torch from files alone, as this interpreter would import it."""
    import importlib.metadata as md
    import importlib.util

    facts = TorchMetadata(
        installed=False,
        version=None,
        location=None,
        cuda=None,
        hip=None,
        git_version=None,
        nccl_requirement=None,
        distribution=None,
    )
    try:
        dist = md.distribution("torch")
    except md.PackageNotFoundError:
        dist = None
    if dist is not None:
        facts["installed"] = True
        facts["version"] = dist.version
        facts["distribution"] = str(getattr(dist, "_path", "")) or None
        facts["nccl_requirement"] = _nccl_pin(dist.requires)
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        torch_dir = Path(spec.origin).parent
        facts["installed"] = True
        facts["location"] = str(torch_dir)
        fields = read_version_file(torch_dir)
        facts["version"] = facts["version"] or fields.get("__version__")
        facts["build_version"] = fields.get("__version__")
        facts["cuda"] = fields.get("cuda")
        facts["hip"] = fields.get("hip")
        facts["git_version"] = fields.get("git_version")
    return facts


def nccl_packages() -> list[list[str]]:
    """[source, path] of every libnccl.so* that an nvidia-nccl-cu* package of this environment installed."""
    import importlib.metadata as md

    found: list[list[str]] = []
    for name in NCCL_PACKAGES:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        # The layout differs between CUDA majors (nvidia/nccl/lib, nvidia/cu13/lib); RECORD knows.
        libs = sorted({str(dist.locate_file(f)) for f in dist.files or [] if f.name.startswith("libnccl.so")})
        found.extend([f"{name}=={dist.version} package", lib] for lib in libs)
    return found


def collect() -> InterpreterFacts:
    return InterpreterFacts(python=python_facts(), torch=torch_metadata(), nccl_packages=nccl_packages())


if __name__ == "__main__":
    if sys.path and sys.path[0] in ("", "."):
        sys.path.pop(0)  # a ./torch directory in the caller's cwd must not shadow the real one
    print(json.dumps(collect()))
