"""The hyperscan database cache: whole entries only, pruned to the ones used last, safe for two doctors at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddp_doctor.diagnose import dbcache
from ddp_doctor.diagnose.multimatch import available, compile_engine

needs_hyperscan = pytest.mark.skipif("hyperscan" not in available(), reason="hyperscan's wheel is not installed")
PATTERNS = [r"NCCL WARN .* failed", r"(?i)cuda error: out of memory", r"Socket Timeout"]
LOG = b"ok\nNCCL WARN NET/Socket : connect failed\nRuntimeError: CUDA error: out of memory\nfine\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "ddp-doctor"


def _entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir())


def test_an_entry_reads_back_only_whole(cache: Path) -> None:
    dbcache.store("k1", b"compiled bytes")
    assert dbcache.load("k1") == b"compiled bytes"
    path = dbcache.path_of("k1")
    whole = path.read_bytes()
    path.write_bytes(whole[:-3])  # cut short, as a crash or a full disk can leave one
    assert dbcache.load("k1") is None
    assert not path.exists(), "a torn entry is removed, so it is written again"
    assert dbcache.load("never-written") is None


def test_a_write_prunes_to_the_entries_used_last_and_dead_writers_temp_files(cache: Path) -> None:
    cache.mkdir()
    old = time.time() - 10 * 86400
    for i in range(10):  # earlier versions' catalogues, each written alone (a write prunes)
        made = dbcache.path_of(f"old{i}", cache / f"made{i}")
        dbcache.store(f"old{i}", b"x" * 100, made.parent)
        os.utime(made, (old + i, old + i))
        made.rename(cache / made.name)
        made.parent.rmdir()
    dbcache.load("old2")  # used now: kept although older than old9
    dead = cache / ".hyperscan-k.db.abc.tmp"
    dead.write_bytes(b"half")
    os.utime(dead, (old, old))
    live = cache / ".hyperscan-k.db.def.tmp"  # another doctor writing right now
    live.write_bytes(b"half")
    dbcache.store("current", b"y")
    assert len([n for n in _entries(cache) if n.endswith(".db")]) == dbcache.KEEP
    kept = {"hyperscan-current.db", "hyperscan-old2.db", "hyperscan-old9.db", "hyperscan-old8.db"}
    assert set(_entries(cache)) == kept | {live.name}


@needs_hyperscan
def test_a_torn_or_older_entry_is_compiled_again_and_finds_the_same_lines(cache: Path) -> None:
    fresh = compile_engine(PATTERNS, "hyperscan").hits(LOG)
    (entry,) = cache.glob("hyperscan-*.db")
    entry.write_bytes(entry.read_bytes()[:-100])
    assert compile_engine(PATTERNS, "hyperscan").hits(LOG) == fresh
    entry.write_bytes(b"\x00" * 64)  # an older doctor's unframed file, or garbage
    assert compile_engine(PATTERNS, "hyperscan").hits(LOG) == fresh
    assert dbcache.load(entry.name[len("hyperscan-") : -len(".db")]) is not None, "the entry was written again"
    assert [p for _, p in fresh] == [0, 1]


_DOCTOR = (
    "import sys\n"
    "from ddp_doctor.diagnose.multimatch import compile_engine\n"
    "hits = compile_engine(sys.argv[1:], 'hyperscan').hits(b'NCCL WARN x failed\\n')\n"
    "print(len(hits))\n"
)


@needs_hyperscan
@pytest.mark.slow
def test_two_doctors_at_once_both_match_and_leave_one_whole_entry(cache: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache.parent)}
    for _ in range(3):
        doctors = [
            subprocess.Popen([sys.executable, "-c", _DOCTOR, *PATTERNS], env=env, stdout=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        outs = [d.communicate(timeout=120)[0] for d in doctors]
        assert [d.returncode for d in doctors] == [0, 0] and outs == ["1\n", "1\n"]
        names = _entries(cache)
        assert len(names) == 1 and names[0].endswith(".db"), names
        assert dbcache.load(names[0][len("hyperscan-") : -len(".db")]) is not None


@needs_hyperscan
def test_a_cache_that_cannot_be_written_only_costs_a_compile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # ddp-doctor/ cannot be made under a file
    assert [p for _, p in compile_engine(PATTERNS, "hyperscan").hits(LOG)] == [0, 1]


def test_the_cpu_features_read_are_the_simd_ones_hyperscan_builds_for(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse4_2 avx2 popcnt ht bmi2\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert dbcache.cpu_features(info) == "avx2 bmi2 popcnt sse4_2"
    assert dbcache.cpu_features(tmp_path / "missing") == ""


@needs_hyperscan
def test_hosts_of_two_cpu_kinds_sharing_a_home_keep_one_entry_each(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for features in ("sse4_2 avx2", "sse4_2 avx2 avx512f", "sse4_2 avx2"):
        monkeypatch.setattr(dbcache, "cpu_features", lambda f=features: f)
        assert [p for _, p in compile_engine(PATTERNS, "hyperscan").hits(LOG)] == [0, 1]
    assert len(_entries(cache)) == 2
