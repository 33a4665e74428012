"""Diagnosis: failure signatures (catalogue.yaml) + a matcher, log text / exit codes -> Results.

The entry points every part uses, so `check`, `bench`, `run`, image runs and `explain` name a
failure with the same cause and remedy (typed Results, root cause first):

    explain_text(captured_output, "job.log", {"rank 1": -9}) -> [Result, ...]  # all explain says
    explain_stream(binary_stream, "job.log", stats) -> [Result, ...]            # any size, bounded memory
    explain_streams([(stream, "attempt_0/1/stderr.log", None), ...]) -> [...]    # one job's logs read as one
    diagnose({"rank-1.log": lines, ...}, {"rank 1": -9}) -> [Result, ...]      # signature findings only
    signature("diag.shm_exhausted") -> Signature(title, tier, cause, remedy, severity, sources, ...)
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from typing import IO

from ddp_doctor.diagnose import blockscan, catalogue, hang, nccltests, p2ptables, patterns, readers, sources
from ddp_doctor.diagnose.engine import Matcher
from ddp_doctor.diagnose.lines import Origin
from ddp_doctor.diagnose.logread import Stats
from ddp_doctor.report import Result, Status

__all__ = ["Stats", "diagnose", "explain_stream", "explain_streams", "explain_text", "signature"]


def _feed(
    matcher: Matcher,
    stream: IO[bytes],
    name: str,
    stats: Stats,
    tail: blockscan.Tail | None,
    origin: Origin | None = None,
) -> None:
    table = patterns.table()
    matcher.source(name, origin if origin is not None else sources.origin_of(name))
    for hit in blockscan.scan(
        stream,
        patterns.engine(),
        stats,
        name=name,
        tail=tail,
        follow=table.follow,
        once=table.once,
        precede=table.precede,
    ):
        text = hit.text.decode("utf-8", "replace")
        if hit.context:
            matcher.line(name, hit.lineno, text, frozenset(), context=True)
        else:
            matcher.line(name, hit.lineno, text, table.owners_of(hit.ids))


def diagnose(
    sources: Mapping[str, Iterable[str]],
    exit_codes: Mapping[str, int] | None = None,
    unknown: bool = False,
    harmless: bool = False,
) -> list[Result]:
    """Results `diag.<signature>` (fail / warn), root cause first; [] when nothing matched.

    `unknown=True` adds `diag.unknown` with the error-looking lines when no signature explains them;
    `harmless=True` adds the known-harmless lines seen (PASS results naming when they are not).
    """
    matcher = Matcher(catalogue.load())
    for name, lines in sources.items():
        # One element = one line (its number is its position), scanned like a file: same engine, same speed.
        blob = "\n".join(line.replace("\n", " ").replace("\r", "") for line in lines).encode("utf-8", "replace")
        _feed(matcher, io.BytesIO(blob + b"\n"), name, Stats(), None)
    for name, code in (exit_codes or {}).items():
        matcher.exit_code(name, code)
    return matcher.results(unknown=unknown, harmless=harmless)


def explain_stream(
    stream: IO[bytes], name: str, stats: Stats | None = None, exit_codes: Mapping[str, int] | None = None
) -> list[Result]:
    """Diagnose one (possibly huge) binary log stream in bounded memory, root cause first.

    Everything explain reports: signatures, unknown failure-looking lines, fatal-signal backtraces,
    known-harmless lines (PASS), and, when nothing failed, a hang read from the log's tail.
    """
    return explain_streams([(stream, name, None)], stats, exit_codes)


def explain_streams(
    logs: Iterable[tuple[IO[bytes], str, Origin | None]],
    stats: Stats | None = None,
    exit_codes: Mapping[str, int] | None = None,
) -> list[Result]:
    """`explain_stream` over several logs of one job (one per rank, pod or task) read as one: each log's lines
    take the origin given (else the one its name says); the first failure is the first by the logs' own times
    where they carry them. Each stream is read to its end before the next is taken from `logs`."""
    matcher = Matcher(catalogue.load())
    stats = stats if stats is not None else Stats()
    tails: list[tuple[str, blockscan.Tail]] = []
    for stream, name, origin in logs:
        tail = blockscan.Tail()
        _feed(matcher, stream, name, stats, tail, origin)
        tails.append((name, tail))
    for key, code in (exit_codes or {}).items():
        matcher.exit_code(key, code)
    results = matcher.results(unknown=True, harmless=True)
    for name, tail in tails:
        for found in _read_tables(name, tail):  # a cause of its own: before the failures that are not causes
            at = next((i for i, r in enumerate(results) if r.status is not Status.FAIL), len(results))
            results.insert(at, found)
    if not any(r.status is Status.FAIL for r in results):
        for name, tail in tails:
            hung = hang.read(readers.load(), catalogue.by_id()["diag.hang"], name, tail.finish(), matcher.pid_rank)
            if hung is not None:
                results.insert(0, hung)
                break
    return results


def _read_tables(name: str, tail: blockscan.Tail) -> list[Result]:
    """What the tables of a test's output say (p2pBandwidthLatencyTest's matrices, nccl-tests' device list)."""
    found = []
    if p2ptables.BANNER in tail.data:
        pairs = p2ptables.slow_pairs(tail.finish())
        if pairs:
            found.append(p2ptables.result(catalogue.by_id()["diag.p2p_slower_than_host"], name, pairs))
    without_mpi = catalogue.by_id()["diag.nccl_tests_without_mpi"]
    if nccltests.DEVICE_LINE.search(tail.data):
        repeated = nccltests.repeated_ranks(tail.finish())
        if repeated:
            found.append(nccltests.result(without_mpi, name, repeated))
    if nccltests.LAUNCH.search(tail.data) and not any(r.id == without_mpi.id for r in found):
        short = nccltests.short_world(tail.finish())
        if short:
            found.append(nccltests.short_result(without_mpi, name, short))
    if nccltests.OUTPUT.search(tail.data) and not any(r.id == without_mpi.id for r in found):
        found += _nccl_tests_runs(without_mpi, name, tail.finish())
    return found


def _nccl_tests_runs(without_mpi: catalogue.Signature, name: str, tail: list[tuple[int, str]]) -> list[Result]:
    """nccl-tests output read for processes that each ran alone: by NCCL's rank lines, then by its summaries."""
    alone = nccltests.repeated_comm_ranks(tail)
    if alone:
        return [nccltests.comm_result(without_mpi, name, alone)]
    summaries = nccltests.separate_summaries(tail)
    return [nccltests.summaries_result(without_mpi, name, summaries)] if summaries else []


def explain_text(text: str | bytes, name: str = "log", exit_codes: Mapping[str, int] | None = None) -> list[Result]:
    """`explain_stream` for output already in memory (a captured run, a test)."""
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    return explain_stream(io.BytesIO(data), name, exit_codes=exit_codes)


def signature(id: str) -> catalogue.Signature | None:
    """The catalogue's entry of a finding (its title, tier, cause, remedy, sources); None for another id."""
    return catalogue.by_id().get(id)
