"""torch without importing it here: package metadata and torch/version.py on disk, then the
real import in a child interpreter under a deadline."""

from __future__ import annotations

import json
import os
import signal
import sys
from importlib import resources
from pathlib import Path
from typing import TypedDict, cast

from ddp_doctor import proc
from ddp_doctor.env.probes import interp_child

IMPORT_TIMEOUT_S = 90.0
"""A cold import of a CUDA build from network storage can take tens of seconds."""


class TorchDist(TypedDict):
    available: bool
    backends: dict[str, bool]
    """nccl, gloo, mpi -> compiled in."""


class TorchImport(TypedDict, total=False):
    """What importing torch in a child interpreter told: torch_child.py's JSON line, plus how it went."""

    probe_wall_s: float
    probe_s: float
    importable: bool
    import_error: str
    import_traceback_tail: str
    stderr_tail: str
    import_s: float
    version: str
    location: str | None
    cuda: str | None
    hip: str | None
    git_version: str | None
    cudnn: int | None
    numpy: str | None
    arch_list: list[str] | None
    dist: TorchDist | None
    nccl_version: str | None
    run_module: bool | None
    """Whether `python -m torch.distributed.run` works."""
    nccl_loaded: str | None
    """The libnccl the import mapped into the process."""
    nccl_loaded_version: str | None
    errors: dict[str, str]
    """What raised while each of the above was asked."""


def read_version_file(torch_dir: Path) -> dict[str, str | None]:
    """torch/version.py holds the build's __version__, cuda, hip and git_version as literals."""
    return interp_child.read_version_file(torch_dir)


def metadata() -> interp_child.TorchMetadata:
    """What can be known about torch from files alone, in the doctor's own interpreter
    (another interpreter: `target.describe(t)["torch"]`, the same code run there)."""
    return interp_child.torch_metadata()


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


def run_import(timeout_s: float = IMPORT_TIMEOUT_S, python: str | None = None) -> TorchImport:
    """Import torch in a child interpreter; its real error text is kept when it fails."""
    env = dict(os.environ)
    # The probe must see the same interpreter settings as the user's training script, but
    # must not create .pyc files or print warnings into our JSON.
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    done = proc.run([python or sys.executable, "-c", _child_source()], timeout_s=timeout_s, env=env)
    result = TorchImport(probe_wall_s=round(done.duration_s, 3))
    if done.timed_out:
        result.update(
            TorchImport(
                importable=False,
                import_error=f"importing torch did not finish within {timeout_s:.0f} s "
                "(a hung import, a stuck network filesystem, or a driver call that never returns)",
            )
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
        result.update(TorchImport(importable=False, import_error=f"{_describe_exit(done.returncode or 0)}: {detail}"))
        return result
    result.update(cast(TorchImport, payload))  # torch_child.py's JSON line
    if not payload.get("importable") and done.stderr.strip():
        result["stderr_tail"] = _tail(done.stderr)
    return result
