"""Sizes as Kubernetes, compose and docker write them -> bytes (None when unreadable)."""

from __future__ import annotations

import re

_K8S = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_K8S_RE = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
# docker / compose: b, k, m, g with optional b suffix, binary multiples
_DOCKER_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([bkmgt]?)b?$", re.IGNORECASE)
_DOCKER = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def k8s_bytes(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    m = _K8S_RE.match(str(value).strip())
    if not m:
        return None
    number = float(m.group(1)) * (10 ** int(m.group(2)) if m.group(2) else 1)
    return int(number * _K8S[m.group(3) or ""])


def docker_bytes(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    m = _DOCKER_RE.match(str(value).strip())
    if not m:
        return None
    return int(float(m.group(1)) * _DOCKER[m.group(2).lower()])


def human(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} B"
