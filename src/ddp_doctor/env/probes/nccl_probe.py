"""The NCCL library file: where it is on disk, and whether it loads (ctypes, ncclGetVersion)
in a child interpreter, so a broken library cannot take the doctor down with it."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import struct
import sys
from pathlib import Path
from typing import TypedDict, cast

from ddp_doctor import proc
from ddp_doctor.env.probes import interp_child

LOAD_TIMEOUT_S = 20.0
PACKAGES = interp_child.NCCL_PACKAGES
LDCONFIG_TIMEOUT_S = 5.0
_LDCONFIG_LINE = r"^\s*{name}\S*\s.*=>\s*(\S+)\s*$"

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


@functools.lru_cache(maxsize=1)
def _ldconfig_cache() -> str:
    """`ldconfig -p` once per process: NCCL and its network plugins are both looked up in it."""
    exe = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if Path(p).exists()), None
    )
    if exe is None:
        return ""
    done = proc.run([exe, "-p"], timeout_s=LDCONFIG_TIMEOUT_S)
    return "" if done.timed_out or done.returncode != 0 else done.stdout


def ldconfig_libs(name: str = "libnccl.so") -> list[Path]:
    """Entries of the dynamic loader's cache (`ldconfig -p`) whose file name starts with `name`, e.g. a
    system libnccl2 package (or, with name="libnccl-net", NCCL network plugins)."""
    line = re.compile(_LDCONFIG_LINE.format(name=re.escape(name)), re.MULTILINE)
    return [Path(m.group(1)) for m in line.finditer(_ldconfig_cache())]


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


class NcclLoad(TypedDict):
    """What loading a libnccl in a child process told (the child prints it as JSON)."""

    loadable: bool
    version: str | None
    error: str | None


class NetPluginFound(TypedDict):
    where: str
    path: str


class NetPluginsJson(TypedDict):
    """The report's nccl.net_plugins as the probe writes it (checks.facts.host.NetPlugins reads it)."""

    names: list[str]
    """The library names NCCL tries, in its order."""
    searched: list[str]
    """Where we looked, in order."""
    found: list[NetPluginFound]


def load(path: str, timeout_s: float = LOAD_TIMEOUT_S) -> NcclLoad:
    done = proc.run([sys.executable, "-c", _CHILD, path], timeout_s=timeout_s)
    if done.timed_out:
        return NcclLoad(loadable=False, version=None, error=f"loading {path} did not finish within {timeout_s:.0f} s")
    for line in reversed(done.stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return cast(NcclLoad, data)  # _CHILD's one JSON line
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return NcclLoad(loadable=False, version=None, error=f"loading {path} crashed (status {done.returncode}): {tail}")


# ---- network plugins (NCCL_NET / NCCL_NET_PLUGIN) ------------------------------------------

# Where dlopen() finds a bare library name (man 8 ld.so): LD_LIBRARY_PATH, the RUNPATH of the caller
# (libnccl, or libtorch_cuda when NCCL is linked into it: their own directories are the usual
# $ORIGIN entries), the ldconfig cache, then the default directories.
DEFAULT_LIB_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")


def net_plugin_names(net_plugin: str | None) -> list[str]:
    """The library names NCCL dlopen()s for its external network plugin, in its order.

    NCCL src/plugin/plugin_open.cc and net.cc (2.21 to 2.28): NCCL_NET_PLUGIN unset -> libnccl-net.so;
    set -> each comma-separated entry as given (a path when it has a '/'), then libnccl-net-<entry>.so
    unless the entry is a path or already a lib*.so name; "none" (any case) -> no external plugin.
    (NCCL 2.18 tried only libnccl-net-<entry>.so; listing both covers it.)"""
    if net_plugin is None:
        return ["libnccl-net.so"]
    value = net_plugin.strip()
    if not value or value.lower() == "none":
        return []
    names: list[str] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        names.append(entry)
        if "/" not in entry and not (entry.startswith("lib") and entry.endswith(".so")):
            names.append(f"libnccl-net-{entry}.so")
    return names


def net_plugins(
    env: dict[str, str],
    torch_location: str | None,
    nccl_library: str | None,
    use_ldconfig: bool = True,
    default_dirs: tuple[str, ...] = DEFAULT_LIB_DIRS,
) -> NetPluginsJson:
    """Which NCCL network plugin libraries the loader would find for the target's environment `env`."""
    names = net_plugin_names(env.get("NCCL_NET_PLUGIN"))
    dirs: list[tuple[str, str]] = [
        ("LD_LIBRARY_PATH", d) for d in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if d
    ]
    if nccl_library and "/" in nccl_library:
        dirs.append(("the NCCL library's directory", str(Path(nccl_library).parent)))
    if torch_location:
        dirs.append(("torch/lib", str(Path(torch_location, "lib"))))
    dirs.extend(("default directory", d) for d in default_dirs)
    found: list[NetPluginFound] = []
    for name in names:
        if "/" in name:
            if Path(name).is_file():
                found.append(NetPluginFound(where="NCCL_NET_PLUGIN path", path=name))
            continue
        found.extend(
            NetPluginFound(where=where, path=str(Path(d, name))) for where, d in dirs if Path(d, name).is_file()
        )
    searched = [d if where == "default directory" else f"{d} ({where})" for where, d in dirs]
    if use_ldconfig and any("/" not in n for n in names):
        searched.append("the ldconfig cache")
        cached = {str(p.name): p for p in ldconfig_libs("libnccl-net")}
        found.extend(NetPluginFound(where="ldconfig cache", path=str(cached[n])) for n in names if n in cached)
    return NetPluginsJson(names=names, searched=searched, found=found)
