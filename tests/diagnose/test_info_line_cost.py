"""What a healthy NCCL_DEBUG=INFO log costs the reader, in counts (never time).

explain keeps up with grep only while healthy INFO lines pass the multi-pattern engine untouched: each line the
engine hits costs a Python callback and a line cut out, each line handed on costs the matcher's reading and its
signature checks. A pattern whose literal is a common INFO word ("Channel", "Failed to", "Using") makes every
such line a hit and the dense log slow, silently. These tests count, on real healthy INFO lines, the lines each
pattern hits, the lines the matcher reads and the signature checks it runs, and the lines holding the start of a
pattern with an unbounded gap (which hyperscan follows to the line's end), each under a ceiling.

The sample: the INFO lines of benchmarks/bench_explain.py's dense log (one communicator's start-up as NCCL
2.18-2.28 print it, 16 ranks, 16 communicators; the benchmark's own sources) and the healthy INFO recordings in
the fixtures (an H200 run's rank log with NCCL 2.28, a two-rank NCCL run).
"""

from __future__ import annotations

import collections
import importlib.util
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddp_doctor.diagnose import blockscan, catalogue, patterns
from ddp_doctor.diagnose.engine import Matcher
from ddp_doctor.diagnose.logread import Stats
from ddp_doctor.diagnose.multimatch import gap_literal
from tests.conftest import FIXTURES

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_explain.py"
RECORDED = (FIXTURES / "gpu" / "live" / "nccl-rank-0.log", FIXTURES / "logs" / "healthy-nccl-info.log")
NCCL_TESTS = tuple(p for p in sorted((FIXTURES / "bench").glob("*_perf*.log")) if "out_of_bounds" not in p.name)
"""Recorded healthy nccl-tests outputs, every layout nccl-tests printed (tests/fixtures/bench/README.md): their
result rows are what the nccl-tests signatures' row patterns must tell apart from a wrong row."""
ROW_SHARE = 0.05
PATTERN_SHARE = 0.01
"""No pattern but NCCL's rank announcement hits more than 1% of healthy INFO lines (today: under 0.1%)."""
READ_SHARE = 0.01
"""The matcher reads at most 1% of the lines, and runs at most one signature check per 100 lines."""


@dataclass(frozen=True)
class Cost:
    lines: int
    hits_by_pattern: dict[int, int]
    """Engine pattern index -> lines of the sample it hits."""
    read: int
    """Lines handed to the matcher (after the announcements of a process seen already are dropped)."""
    signature_checks: int


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    spec = importlib.util.spec_from_file_location("bench_explain", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    dense = tmp_path_factory.mktemp("info") / "dense.log"
    bench.generate_dense(dense, 1)
    data = dense.read_bytes()
    data = data[: data.index(bench.ENDING.encode())]  # the INFO lines only, not the failure the benchmark ends with
    return data + b"".join(p.read_bytes() for p in RECORDED)


def cost(data: bytes) -> Cost:
    table = patterns.table()
    engine = patterns.engine()
    rows = data.split(b"\n")
    by_pattern = collections.Counter(pid for row in rows for pid in engine.which(row))
    matcher = Matcher(catalogue.load())
    stats = Stats()
    read = 0
    scan = blockscan.scan(io.BytesIO(data), engine, stats, follow=table.follow, once=table.once, precede=table.precede)
    for hit in scan:
        read += 1
        text = hit.text.decode("utf-8", "replace")
        owners = frozenset() if hit.context else table.owners_of(hit.ids)
        matcher.line("sample", hit.lineno, text, owners, context=hit.context)
    return Cost(stats.lines, dict(by_pattern), read, matcher.signature_checks)


def too_common(hits_by_pattern: dict[int, int], lines: int, exempt: frozenset[int]) -> list[tuple[int, int]]:
    """(pattern index, lines hit) of every pattern over the share, most first."""
    over = [(pid, n) for pid, n in hits_by_pattern.items() if pid not in exempt and n > PATTERN_SHARE * lines]
    return sorted(over, key=lambda x: -x[1])


def test_the_sample_is_dense_healthy_info(sample: bytes) -> None:
    text = sample.decode()
    assert text.count("NCCL INFO") > 0.9 * text.count("\n") > 10_000
    cues = re.compile(r"error|warn|fail|fatal|killed|timeout|abort|fault|signal", re.IGNORECASE)
    assert sum(1 for row in text.splitlines() if cues.search(row)) > 0.1 * text.count("\n")  # grep's cue words


def test_no_pattern_hits_healthy_info_lines_wholesale(sample: bytes) -> None:
    got = cost(sample)
    table = patterns.table()
    over = too_common(got.hits_by_pattern, got.lines, table.once)
    assert not over, "patterns hitting healthy NCCL INFO lines (each hit costs Python work): " + "; ".join(
        f"{table.owners[pid]} {table.patterns[pid]!r} on {n} of {got.lines} lines" for pid, n in over
    )


def test_the_matcher_reads_few_lines_and_checks_few_signatures(sample: bytes) -> None:
    got = cost(sample)
    assert got.read <= READ_SHARE * got.lines, f"{got.read} of {got.lines} healthy INFO lines read"
    assert got.signature_checks <= READ_SHARE * got.lines, f"{got.signature_checks} signature checks"


def test_no_gap_pattern_starts_like_healthy_info_lines(sample: bytes) -> None:
    # Hyperscan follows a pattern's unbounded gap (`A.*B`) to the end of every line that holds A, a cost no hit
    # count shows. A gap pattern found by its long literal instead (multimatch.gap_literal) costs nothing there;
    # any other one must start with words healthy INFO lines do not hold.
    table = patterns.table()
    rows = sample.split(b"\n")
    over = []
    for pattern in table.patterns:
        gap = re.search(r"\.[*+]", pattern)
        if gap is None or gap_literal(pattern) is not None:
            continue
        try:
            start = re.compile(pattern[: gap.start()].encode(), re.MULTILINE)
        except re.error:
            continue  # the gap is inside a group: its start is no pattern of its own
        n = sum(1 for row in rows if start.search(row))
        if n > PATTERN_SHARE * len(rows):
            over.append(f"{pattern!r}: its start is on {n} of {len(rows)} lines")
    assert not over, "; ".join(over)


def test_no_pattern_hits_healthy_nccl_tests_rows_wholesale() -> None:
    # The row patterns look at numbers in fixed columns; one matching a healthy row would hit every row of a
    # sweep (each size, each collective).
    table = patterns.table()
    engine = patterns.engine()
    rows = [row for p in NCCL_TESTS for row in p.read_bytes().split(b"\n")]
    hits = collections.Counter(pid for row in rows for pid in engine.which(row))
    over = [(pid, n) for pid, n in hits.items() if n > ROW_SHARE * len(rows)]
    assert len(NCCL_TESTS) >= 5 and len(rows) > 100
    assert not over, "; ".join(f"{table.owners[pid]} {table.patterns[pid]!r} on {n} of {len(rows)}" for pid, n in over)


def test_the_ceiling_catches_a_common_word(sample: bytes) -> None:
    # A pattern on "Failed to" (NCCL's harmless plugin probes) would hit a line in six of a healthy start-up.
    common = re.compile(rb"Failed to (?:find|initialize)")
    rows = sample.split(b"\n")
    hits = sum(1 for row in rows if common.search(row))
    assert too_common({-1: hits}, len(rows), frozenset()) == [(-1, hits)]
