"""The NCCL library file: where it is on disk, and whether it loads (ctypes, ncclGetVersion)
in a child interpreter, so a broken library cannot take the doctor down with it."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import sys
from pathlib import Path
from typing import Any

from ddp_doctor import proc
from ddp_doctor.env.probes import interp_child

LOAD_TIMEOUT_S = 20.0
PACKAGES = interp_child.NCCL_PACKAGES
LDCONFIG_TIMEOUT_S = 5.0
_LDCONFIG_LINE = re.compile(r"^\s*libnccl\.so\S*\s.*=>\s*(\S+)\s*$", re.MULTILINE)

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
    return [(src, Path(path)) for src, path in interp_child.nccl_packages()]


def _libs_in(directory: str | Path) -> list[Path]:
    try:
        return sorted(Path(directory).glob("libnccl.so*"))
    except OSError:
        return []


def ldconfig_libs() -> list[Path]:
    """libnccl entries of the dynamic loader's cache (`ldconfig -p`), e.g. a system libnccl2 package."""
    exe = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if Path(p).exists()), None
    )
    if exe is None:
        return []
    done = proc.run([exe, "-p"], timeout_s=LDCONFIG_TIMEOUT_S)
    if done.timed_out or done.returncode != 0:
        return []
    return [Path(m.group(1)) for m in _LDCONFIG_LINE.finditer(done.stdout)]


def candidates(
    torch_location: str | None,
    packages: list[tuple[str, Path]] | None = None,
    ld_library_path: str | None = None,
    use_ldconfig: bool = True,
) -> list[tuple[str, Path]]:
    """(source, path) of every NCCL library torch's libraries could load, in the dynamic loader's
    order: LD_LIBRARY_PATH, then the RUNPATH of libtorch_cuda (torch/lib and the nvidia-* packages
    of the target environment), then the ldconfig cache. `packages`: the target's, from
    `target.describe()`; None: the doctor's own environment."""
    found: list[tuple[str, Path]] = []
    llp = os.environ.get("LD_LIBRARY_PATH", "") if ld_library_path is None else ld_library_path
    for d in (d for d in llp.split(os.pathsep) if d):
        found.extend(("LD_LIBRARY_PATH", lib) for lib in _libs_in(d))
    if torch_location:
        found.extend(("bundled in torch/lib", lib) for lib in _libs_in(Path(torch_location, "lib")))
    found.extend(_package_libs() if packages is None else packages)
    if use_ldconfig:
        found.extend(("ldconfig cache", lib) for lib in ldconfig_libs())
    seen: set[str] = set()
    unique = []
    for src, lib in found:
        try:
            key = str(lib.resolve())
        except OSError:
            key = str(lib)
        if key not in seen:
            seen.add(key)
            unique.append((src, lib))
    return unique


def _needed(path: Path) -> list[str] | None:
    """DT_NEEDED of a 64-bit little-endian ELF shared library, or None when it cannot be read."""
    try:
        with path.open("rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            (phoff,) = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            loads, dynamic = [], None
            for i in range(phnum):
                p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", table, i * phentsize)
                if p_type == 1:
                    loads.append((p_vaddr, p_offset, p_filesz))
                elif p_type == 2:
                    dynamic = (p_offset, p_filesz)
            if dynamic is None:
                return None
            f.seek(dynamic[0])
            raw = f.read(dynamic[1])
            entries = [struct.unpack_from("<qQ", raw, o) for o in range(0, len(raw) - 15, 16)]
            strtab = next((v for t, v in entries if t == 5), None)
            if strtab is None:
                return None
            base = next((off + strtab - va for va, off, size in loads if va <= strtab < va + size), None)
            if base is None:
                return None
            names = []
            for tag, value in entries:
                if tag == 1:
                    f.seek(base + value)
                    names.append(f.read(256).split(b"\0", 1)[0].decode("utf-8", "replace"))
            return names
    except (OSError, struct.error):
        return None


def static_in_torch(torch_location: str | None) -> str | None:
    """The libtorch_cuda file when NCCL is linked into it (USE_STATIC_NCCL builds: no libnccl in its
    DT_NEEDED), else None."""
    if not torch_location:
        return None
    lib = Path(torch_location, "lib", "libtorch_cuda.so")
    if not lib.is_file():
        return None
    needed = _needed(lib)
    if needed is None or any(n.startswith("libnccl") for n in needed):
        return None
    return str(lib)


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
