"""The NCCL library file: where it is on disk, and whether it loads (ctypes, ncclGetVersion)
in a child interpreter, so a broken library cannot take the doctor down with it."""

from __future__ import annotations

import importlib.metadata as md
import json
import sys
from pathlib import Path
from typing import Any

from ddp_doctor import proc

LOAD_TIMEOUT_S = 20.0
PACKAGES = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")

_CHILD = r"""
import ctypes, json, sys
path = sys.argv[1]
try:
    lib = ctypes.CDLL(path)
    code = ctypes.c_int(0)
    rc = lib.ncclGetVersion(ctypes.byref(code))
    c = code.value
    v = f"{c // 10000}.{c % 10000 // 100}.{c % 100}" if c >= 10000 else f"{c // 1000}.{c % 1000 // 100}.{c % 100}"
    print(json.dumps({"loadable": rc == 0, "version": v if rc == 0 else None,
                      "error": None if rc == 0 else f"ncclGetVersion returned {rc}"}))
except OSError as exc:
    print(json.dumps({"loadable": False, "version": None, "error": str(exc)}))
except AttributeError as exc:
    print(json.dumps({"loadable": False, "version": None, "error": f"not an NCCL library: {exc}"}))
"""


def _package_libs() -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for name in PACKAGES:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        # The layout differs between CUDA majors (nvidia/nccl/lib, nvidia/cu13/lib); RECORD knows.
        libs = sorted({Path(str(dist.locate_file(f))) for f in dist.files or [] if f.name.startswith("libnccl.so")})
        found.extend((f"{name}=={dist.version} package", lib) for lib in libs)
    return found


def candidates(torch_location: str | None) -> list[tuple[str, Path]]:
    """(source, path) of every NCCL library that torch could load, in loader order of likelihood."""
    found: list[tuple[str, Path]] = []
    if torch_location:
        for lib in sorted(Path(torch_location, "lib").glob("libnccl*.so*")):
            found.append(("bundled in torch/lib", lib))
    found.extend(_package_libs())
    return found


def load(path: str, timeout_s: float = LOAD_TIMEOUT_S) -> dict[str, Any]:
    done = proc.run([sys.executable, "-c", _CHILD, path], timeout_s=timeout_s)
    if done.timed_out:
        return {"loadable": False, "version": None, "error": f"loading {path} did not finish within {timeout_s:.0f} s"}
    for line in reversed(done.stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return data
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"loadable": False, "version": None, "error": f"loading {path} crashed (status {done.returncode}): {tail}"}
