"""torch without importing it here: package metadata and torch/version.py on disk, then the
real import in a child interpreter under a deadline."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import re
import signal
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from ddp_doctor import proc

IMPORT_TIMEOUT_S = 90.0
"""A cold import of a CUDA build from network storage can take tens of seconds."""

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


def metadata() -> dict[str, Any]:
    """What can be known about torch from files alone."""
    facts: dict[str, Any] = {
        "installed": False,
        "version": None,
        "location": None,
        "cuda": None,
        "hip": None,
        "git_version": None,
        "nccl_requirement": None,
        "distribution": None,
    }
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


def _child_source() -> str:
    return resources.files(__package__).joinpath("torch_child.py").read_text(encoding="utf-8")


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the interpreter was killed by {name} while importing torch"
    return f"the interpreter exited with status {returncode} while importing torch"


def _tail(text: str, lines: int = 8) -> str:
    kept = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(kept[-lines:])


def run_import(timeout_s: float = IMPORT_TIMEOUT_S, python: str | None = None) -> dict[str, Any]:
    """Import torch in a child interpreter; its real error text is kept when it fails."""
    env = dict(os.environ)
    # The probe must see the same interpreter settings as the user's training script, but
    # must not create .pyc files or print warnings into our JSON.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    done = proc.run([python or sys.executable, "-c", _child_source()], timeout_s=timeout_s, env=env)
    result: dict[str, Any] = {"probe_wall_s": round(done.duration_s, 3)}
    if done.timed_out:
        result.update(
            importable=False,
            import_error=f"importing torch did not finish within {timeout_s:.0f} s "
            "(a hung import, a stuck network filesystem, or a driver call that never returns)",
        )
        return result
    payload = None
    for line in reversed(done.stdout.strip().splitlines()):
        try:
            payload = json.loads(line)
            break
        except json.JSONDecodeError:
            continue
    if not isinstance(payload, dict):
        detail = _tail(done.stderr) or _tail(done.stdout) or "no output"
        result.update(importable=False, import_error=f"{_describe_exit(done.returncode or 0)}: {detail}")
        return result
    result.update(payload)
    if not payload.get("importable") and done.stderr.strip():
        result["stderr_tail"] = _tail(done.stderr)
    return result
