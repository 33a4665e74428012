"""The compiled hyperscan databases kept in the user's cache ($XDG_CACHE_HOME/ddp-doctor, else ~/.cache/ddp-doctor).

Only an optimisation (compiling the catalogue takes ~0.4 s): a missing, torn, foreign or unwritable entry means
compiling again, never a wrong or broken matcher. An entry is named by the hash of what it was compiled from and
holds a checksum of its bytes, checked before the bytes reach hyperscan, so a file cut short by a crash or a full
disk is never loaded. It is written under a name of its own and renamed into place (two doctors at once each
write a whole file; the rename is atomic). After writing one, only the KEEP entries used last stay: this
version's and a few more, so two installed versions sharing a home do not evict each other on every run, and
the directory stays bounded (KEEP files of about 300 KB) while the knowledge changes.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path

KEEP = 4
"""Databases kept after a write: the one just written and the three used most recently (a load marks one used)."""
STALE_TMP_S = 3600.0
"""A half-written entry this old belongs to a writer that died (a write takes milliseconds): removed."""
_MAGIC = b"ddp-doctor hyperscan db 1 sha256="
_PREFIX, _SUFFIX = "hyperscan-", ".db"


_SIMD = frozenset({"sse4_2", "popcnt", "bmi2", "avx2", "avx512f", "avx512bw", "avx512vbmi"})
"""The CPU features a hyperscan database is built for (hs_populate_platform): part of the key, so hosts of
two CPU kinds sharing a home (a login node, the GPU nodes) keep one entry each instead of replacing the
other's on every run (hyperscan refuses a database built for features the CPU lacks)."""


def cpu_features(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        with cpuinfo.open(encoding="ascii", errors="replace") as f:
            line = next((ln for ln in f if ln.startswith("flags")), "")
    except OSError:
        return ""
    return " ".join(sorted(_SIMD.intersection(line.partition(":")[2].split())))


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "ddp-doctor")


def key_of(source: object) -> str:
    """The entry name's key: a hash of everything the database is compiled from (patterns, flags, versions)."""
    return hashlib.sha256(repr(source).encode()).hexdigest()[:24]


def path_of(key: str, directory: Path | None = None) -> Path:
    return (directory or cache_dir()) / f"{_PREFIX}{key}{_SUFFIX}"


def _framed(payload: bytes) -> bytes:
    return _MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def load(key: str, directory: Path | None = None) -> bytes | None:
    """The serialised database of this key, or None: not cached, unreadable, or not whole (then removed)."""
    path = path_of(key, directory)
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head, _, payload = data.partition(b"\n")
    if head != _MAGIC + hashlib.sha256(payload).hexdigest().encode():
        _remove(path)  # torn, or an older doctor's unframed file: never handed to hyperscan
        return None
    try:
        os.utime(path)  # used now: the prune keeps the entries used last
    except OSError:
        pass
    return payload


def store(key: str, payload: bytes, directory: Path | None = None) -> None:
    """Write the entry whole (a temp file, fsync, rename), then prune. OSError when the cache is not writable."""
    target = path_of(key, directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_framed(payload))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    prune(target.parent, keep=target)


def prune(directory: Path, keep: Path) -> list[Path]:
    """Remove all but `keep` and the KEEP - 1 entries used most recently, and temp files of dead writers."""
    removed: list[Path] = []
    entries: list[tuple[float, Path]] = []
    now = time.time()
    for path in directory.glob(f"{_PREFIX}*{_SUFFIX}"):
        try:
            entries.append((path.stat().st_mtime, path))
        except OSError:
            continue  # removed by another doctor's prune meanwhile
    others = [p for _, p in sorted(entries, reverse=True) if p != keep]
    old_tmps = [p for p in directory.glob(f".{_PREFIX}*.tmp") if _older(p, now - STALE_TMP_S)]
    for path in [*others[KEEP - 1 :], *old_tmps]:
        if _remove(path):
            removed.append(path)
    return removed


def _remove(path: Path) -> bool:
    try:
        path.unlink()
    except OSError:
        return False  # gone already (another doctor pruned it), or a cache we may read but not change
    return True


def _older(path: Path, than: float) -> bool:
    try:
        return path.stat().st_mtime < than
    except OSError:
        return False
