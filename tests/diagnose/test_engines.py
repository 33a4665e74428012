"""The block reader finds what the previous line reader found, on every log we have, with every engine.

The line reader (one RE2 union over each chunk, every signature's Python regex tried on each candidate
line) was compared with the block reader here on the whole fixture corpus while both existed; its
findings on every fixture log were then recorded in tests/fixtures/logs/line-reader-findings.json and
the line reader removed. A log added later is compared with the other engines instead.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ddp_doctor.diagnose import blockscan, catalogue, patterns
from ddp_doctor.diagnose.engine import Matcher
from ddp_doctor.diagnose.logread import Stats
from ddp_doctor.diagnose.multimatch import available
from ddp_doctor.report import Result
from tests.conftest import FIXTURES

CORPUS = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".txt") and p.is_file())
LINE_READER = json.loads((FIXTURES / "logs" / "line-reader-findings.json").read_text())
Finding = tuple[str, str, list[int | None]]


_READERS = ("diag.fatal_signal", "diag.unknown")
"""Findings of readers the line reader did not have (fatal-signal backtraces; tracebacks and lines that show a
process ending badly, which now make diag.unknown): every engine must agree on them, the line reader's record
does not hold them. Every signature finding must be what the line reader found."""


def _findings(results: list[Result], readers: bool = False) -> list[Finding]:
    return [(r.id, r.status.value, [e.line for e in r.evidence]) for r in results if readers or r.id not in _READERS]


def _read(engine: str, data: bytes, name: str, chunk: int, readers: bool = False) -> list[Finding]:
    matcher = Matcher(catalogue.load())
    table = patterns.table()
    scan = blockscan.scan(
        io.BytesIO(data), patterns.engine(engine), Stats(), name=name, chunk=chunk, follow=table.follow, once=table.once
    )
    for hit in scan:
        text = hit.text.decode("utf-8", "replace")
        if hit.context:
            matcher.line(name, hit.lineno, text, frozenset(), context=True)
        else:
            matcher.line(name, hit.lineno, text, table.owners_of(hit.ids))
    return _findings(matcher.results(unknown=True, harmless=False), readers)


def test_the_corpus_is_not_empty() -> None:
    assert len(CORPUS) >= 60
    assert len(LINE_READER) >= 60


@pytest.mark.parametrize("engine", available())
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_same_findings_as_the_line_reader(engine: str, path: Path) -> None:
    key = str(path.relative_to(FIXTURES))
    data = path.read_bytes()
    got = _read(engine, data, path.name, chunk=1 << 16)
    if key in LINE_READER:
        assert [[i, s, lines] for i, s, lines in got] == [f for f in LINE_READER[key] if f[0] not in _READERS]
    else:  # a log added after the line reader went: every engine must agree with the default one
        assert got == _read(available()[0], data, path.name, chunk=1 << 16)
    # the readers too; and small blocks: lines cut across block boundaries give the same findings
    everything = _read(engine, data, path.name, chunk=1 << 16, readers=True)
    assert everything == _read(available()[0], data, path.name, chunk=1 << 16, readers=True)
    assert _read(engine, data, path.name, chunk=4096, readers=True) == everything
