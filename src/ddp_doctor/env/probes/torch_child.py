# Runs in a short-lived child interpreter (`python -c <this source>`), never in the parent:
# importing torch is what is being tested, and it must not touch the doctor's own process.
# It prints one JSON object on stdout. It never initialises CUDA (no torch.cuda.is_available()).
# Parts of torch's API used here carry no annotations, hence:
# mypy: disable-error-code="no-untyped-call"
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

if sys.path and sys.path[0] in ("", "."):
    sys.path.pop(0)  # a ./torch directory in the caller's cwd must not shadow the real one

t0 = time.perf_counter()
out: dict[str, Any] = {"importable": False}
try:
    import torch
except BaseException as exc:  # noqa: BLE001 - the exact failure is the finding
    import traceback

    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    out["import_error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    out["import_traceback_tail"] = "".join(lines[-6:])[-3000:]
    print(json.dumps(out))
    sys.exit(0)

out["importable"] = True
out["import_s"] = round(time.perf_counter() - t0, 3)
out["version"] = str(torch.__version__)
out["location"] = getattr(torch, "__file__", None)
version_mod = getattr(torch, "version", None)
out["cuda"] = getattr(version_mod, "cuda", None)
out["hip"] = getattr(version_mod, "hip", None)
out["git_version"] = getattr(version_mod, "git_version", None)


def attempt(name: str, fn: Callable[[], Any]) -> None:
    try:
        out[name] = fn()
    except BaseException as exc:  # noqa: BLE001
        out[name] = None
        out.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"[:500]


def cudnn_version() -> int | None:
    cudnn = torch.backends.cudnn
    return cudnn.version() if cudnn.is_available() else None


def arch_list() -> list[str]:
    # torch.cuda.get_arch_list() returns [] unless a device is usable; the compiled-in
    # flags are what matter for "no kernel image" and need no device.
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    value = flags() if flags is not None else None
    return value.split() if value else []


def distributed() -> dict[str, Any]:
    import torch.distributed as dist

    if not dist.is_available():
        return {"available": False, "backends": {"nccl": False, "gloo": False, "mpi": False}}
    return {
        "available": True,
        "backends": {
            "nccl": bool(dist.is_nccl_available()),
            "gloo": bool(dist.is_gloo_available()),
            "mpi": bool(dist.is_mpi_available()),
        },
    }


def nccl_version() -> str | None:
    if not hasattr(torch._C, "_nccl_version"):
        return None
    from torch.cuda import nccl

    v = nccl.version()  # (major, minor, patch) or (major, minor, patch, suffix)
    if not isinstance(v, tuple):
        return str(v)
    return ".".join(str(p) for p in v[:3]) + (str(v[3]) if len(v) > 3 else "")


def run_module() -> bool:
    from torch.distributed import run

    return callable(getattr(run, "main", None))


def loaded_nccl() -> str | None:
    # The library torch really mapped, whichever of torch/lib, nvidia-nccl-cu*, or a system
    # copy the dynamic loader picked.
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
        for line in f:
            path = line.rstrip("\n").split(None, 5)[-1] if line.count(" ") >= 5 else ""
            if "/libnccl" in path and ".so" in path:
                return path.strip()
    return None


def nccl_lib_version(path: str) -> str:
    import ctypes

    lib = ctypes.CDLL(path)
    code = ctypes.c_int(0)
    rc = lib.ncclGetVersion(ctypes.byref(code))
    if rc != 0:
        raise RuntimeError(f"ncclGetVersion returned {rc}")
    c = code.value
    # NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older ones major*1000 + minor*100 + patch.
    return f"{c // 10000}.{c % 10000 // 100}.{c % 100}" if c >= 10000 else f"{c // 1000}.{c % 1000 // 100}.{c % 100}"


def numpy_version() -> str | None:
    # torch imports numpy itself when present, so this costs nothing more; without it,
    # torch.distributed's *_object collectives raise "Numpy is not available".
    try:
        import numpy
    except ImportError:
        return None
    return str(numpy.__version__)


attempt("cudnn", cudnn_version)
attempt("numpy", numpy_version)
attempt("arch_list", arch_list)
attempt("dist", distributed)
attempt("nccl_version", nccl_version)
attempt("run_module", run_module)
attempt("nccl_loaded", loaded_nccl)
if out.get("nccl_loaded"):
    attempt("nccl_loaded_version", lambda: nccl_lib_version(out["nccl_loaded"]))
out["probe_s"] = round(time.perf_counter() - t0, 3)
sys.stdout.write(json.dumps(out) + "\n")
sys.stdout.flush()
# Tearing down an interpreter that imported torch takes a few hundred ms (module and
# allocator finalisers) and proves nothing more; this child holds no files to flush.
os._exit(0)
