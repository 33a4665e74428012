"""Does a build's arch list run on a GPU of compute capability X.Y?

SASS for sm_XY runs on the same major at an equal or higher minor (sm_80 runs on sm_86);
embedded PTX compute_XY is JIT-compiled for any GPU of capability >= X.Y. Arch-specific
targets (sm_90a, sm_100f) only run on exactly that capability. Source: CUDA C++
Programming Guide, "Binary Compatibility" and "PTX Compatibility".
"""

from __future__ import annotations

import re

_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


def sm_name(compute_capability: str) -> str:
    """'9.0' -> 'sm_90'."""
    major, _, minor = compute_capability.partition(".")
    return f"sm_{major}{minor or '0'}"


def _parse(arch: str) -> tuple[str, int, int, str] | None:
    m = _ARCH.match(arch.strip())
    if not m:
        return None
    return m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)


def runs_on(sm: str, arch_list: list[str]) -> bool:
    gpu = _parse(sm)
    if gpu is None:
        return False
    _, g_major, g_minor, _ = gpu
    for arch in arch_list:
        parsed = _parse(arch)
        if parsed is None:
            continue
        kind, major, minor, suffix = parsed
        if suffix:
            if (major, minor) == (g_major, g_minor):
                return True
            continue
        if kind == "sm" and major == g_major and minor <= g_minor:
            return True
        if kind == "compute" and (major, minor) <= (g_major, g_minor):
            return True
    return False


def how_it_runs(sm: str, arch_list: list[str]) -> str | None:
    """'sm_90' (exact SASS), 'sm_80 SASS', 'compute_90 PTX (JIT)' or None."""
    if sm in arch_list:
        return sm
    for arch in arch_list:
        if arch.startswith("sm_") and runs_on(sm, [arch]):
            return f"{arch} SASS"
    for arch in arch_list:
        if arch.startswith("compute_") and runs_on(sm, [arch]):
            return f"{arch} PTX (JIT-compiled at first use)"
    return None
