"""The streaming reader: exact line numbers at any chunk size, any encoding, bounded lines."""

from __future__ import annotations

import gzip
import io
import re

import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from ddp_doctor.diagnose import explain_stream, patterns
from ddp_doctor.diagnose.blockscan import Tail, scan
from ddp_doctor.diagnose.lines import clean, origin
from ddp_doctor.diagnose.logread import MAX_LINE, Stats
from ddp_doctor.diagnose.multimatch import available

BUS = "RuntimeError: DataLoader worker (pid 7) is killed by signal: Bus error."
HEALTHY = "host:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"


def _candidates(data: bytes, chunk: int, engine: str | None = None) -> list[tuple[int, bytes]]:
    return [
        (c.lineno, c.text)
        for c in scan(io.BytesIO(data), patterns.engine(engine), Stats(), chunk=chunk)
        if not c.context
    ]


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(st.sampled_from([BUS, HEALTHY, "", "x" * 300, "ERROR: boom", "step 1 loss 0.5"]), max_size=40),
    chunk=st.integers(min_value=16, max_value=600),
    crlf=st.booleans(),
    engine=st.sampled_from(available()),
)
def test_line_numbers_are_exact_at_any_chunk_size(lines: list[str], chunk: int, crlf: bool, engine: str) -> None:
    eol = "\r\n" if crlf else "\n"
    data = eol.join(lines).encode() + (eol.encode() if lines else b"")
    expected = {i for i, line in enumerate(lines, start=1) if line in (BUS, "ERROR: boom")}
    got = _candidates(data, chunk, engine)
    # every candidate carries its true line number (a line longer than the chunk may come in pieces) ...
    for n, text in got:
        assert text.rstrip(b"\r") in lines[n - 1].encode(), (n, text)
    # ... and every line that matters is a candidate (the RE2 filter is exact; the literal one may add more)
    numbers = {n for n, _ in got}
    assert expected <= numbers
    if engine != "re":  # the regex engines are exact; the literal fallback may add lines the matcher drops
        assert numbers == expected


def test_stats_count_lines_and_bytes() -> None:
    data = b"a\nb\nc"  # no trailing newline: still three lines
    stats = Stats()
    explain_stream(io.BytesIO(data), "x", stats)
    assert (stats.lines, stats.bytes_read) == (3, 5)


def test_ansi_crlf_and_bad_utf8_are_cleaned() -> None:
    data = b"step\r\n\x1b[31m[rank1]: " + BUS.encode() + b"\x1b[0m \xff\xfe\r\n"
    results = explain_stream(io.BytesIO(data), "job.log")
    shm = next(r for r in results if r.id == "diag.shm_exhausted")
    assert shm.rank == 1 and shm.evidence[0].line == 2
    assert "\x1b" not in shm.evidence[0].text and "\r" not in shm.evidence[0].text
    assert shm.evidence[0].text.startswith("[rank1]: RuntimeError")


def test_gzip_and_zstd_are_read_through(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ddp_doctor.diagnose.logread import open_log

    body = (HEALTHY + "\n") * 1000 + BUS + "\n"
    for name, blob in (
        ("a.log.gz", gzip.compress(body.encode())),
        ("a.log.zst", zstandard.ZstdCompressor().compress(body.encode())),
    ):
        path = tmp_path / name
        path.write_bytes(blob)
        stream, shown = open_log(str(path))
        with stream:
            results = explain_stream(stream, shown)
        assert shown == name
        assert [r.evidence[0].line for r in results if r.id == "diag.shm_exhausted"] == [1001]


def test_binary_garbage_does_not_crash() -> None:
    import random

    rng = random.Random(4)
    data = bytes(rng.getrandbits(8) for _ in range(300_000))
    explain_stream(io.BytesIO(data), "garbage.bin")  # any result is fine; no exception


def test_a_huge_line_is_capped_and_still_scanned() -> None:
    line = b"A" * (3 * MAX_LINE) + BUS.encode() + b"B" * (3 * MAX_LINE)
    got = [c for c in scan(io.BytesIO(line + b"\nnext\n"), patterns.engine(), Stats(), chunk=4096) if not c.context]
    assert got and all(len(c.text) <= MAX_LINE for c in got)
    assert {c.lineno for c in got} == {1}
    assert any(BUS.encode() in c.text for c in got)


def test_origin_prefixes() -> None:
    assert origin("[rank3]: boom").rank == 3
    assert origin("[default1]:[rank1]: boom").rank == 1
    assert origin("[default2]: boom").local_rank == 2
    nccl = origin("node-a:123:456 [5] NCCL WARN x")
    assert (nccl.node, nccl.gpu, nccl.pid) == ("node-a", 5, 123)
    pod = origin("[pod/job-worker-1/pytorch] [rank9]: boom")
    assert (pod.node, pod.rank) == ("job-worker-1", 9)
    assert origin("[Rank 4] Watchdog caught collective operation timeout").rank == 4
    assert origin("plain line").label() == ""
    assert clean("\x1b[1;31mred\x1b[0m\r\n") == "red"
    assert re.fullmatch(r"\S+", origin("h:1:2 [0] x", node="pod-0").node or "")


def test_the_tail_keeps_the_last_lines_with_their_numbers() -> None:
    data = b"".join(b"line %d\n" % i for i in range(1, 50001))
    tail = Tail(limit=4096)
    list(scan(io.BytesIO(data), patterns.engine(), Stats(), chunk=1 << 16, tail=tail))
    rows = tail.finish()
    assert rows[-1] == (50000, "line 50000")
    assert all(text == f"line {n}" for n, text in rows)
    assert 300 < len(rows) < 500  # about 4 KB of them, the first cut line dropped


def test_announcements_without_nccls_prefix_stay_small_in_memory() -> None:
    # NCCL's rank announcement is read once per process, keyed by the "host:pid" before " [dev]"; a log that
    # strips that prefix has no key, so every announcement is a line of its own and nothing is kept per line
    # (a key cut at a missing " [" once held the rest of the block: gigabytes over a long log).
    import tracemalloc

    table = patterns.table()
    lines = [
        f"NCCL INFO comm 0x{i:x} rank {i % 8} nRanks 8 nNodes 1 localRanks 8 localRank {i % 8}" for i in range(3000)
    ]
    data = ("\n".join(lines) + "\n").encode()
    tracemalloc.start()
    try:
        got = [c.lineno for c in scan(io.BytesIO(data), patterns.engine(), Stats(), chunk=1 << 16, once=table.once)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == list(range(1, 3001))
    assert peak < 8 << 20, f"peak {peak >> 20} MiB for a {len(data) >> 10} KiB log"


def test_a_process_announces_its_rank_once() -> None:
    table = patterns.table()
    rows = [
        f"node:{pid}:{pid + 1} [0] NCCL INFO comm 0x{c:x} rank {pid - 10} nRanks 2"
        for c in range(5)
        for pid in (10, 11)
    ]
    got = [
        c.text for c in scan(io.BytesIO(("\n".join(rows) + "\n").encode()), patterns.engine(), Stats(), once=table.once)
    ]
    assert got == [rows[0].encode(), rows[1].encode()]


def test_a_gap_pattern_found_by_its_literal_holds_only_its_own_lines() -> None:
    # Hyperscan looks for " via NET/Socket" alone and the pattern confirms the line: a line holding the literal
    # without the pattern's start is no hit, on every engine alike.
    table = patterns.table()
    socket = table.patterns.index(r"Channel \d+/\d+ : .* via NET/Socket")
    rows = [
        "node:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0",
        "node:1:2 [0] NCCL INFO Ring 00 : 1 -> 0 via NET/Socket/0",
        "node:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] via P2P/CUMEM/read",
    ]
    data = ("\n".join(rows) + "\n").encode()
    for engine in available():
        got = [c.lineno for c in scan(io.BytesIO(data), patterns.engine(engine), Stats()) if socket in c.ids]
        assert got == [1], engine
        assert [socket in patterns.engine(engine).which(r.encode()) for r in rows] == [True, False, False], engine
