"""The block reader finds what the previous line reader found, on every log we have, with every engine."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ddp_doctor.diagnose import legacy_explain_stream, patterns
from ddp_doctor.diagnose.multimatch import available
from tests.conftest import FIXTURES

CORPUS = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".log", ".txt") and p.is_file())


def _findings(results: list) -> list[tuple[str, str, list[int | None]]]:  # type: ignore[type-arg]
    return [(r.id, r.status.value, [e.line for e in r.evidence]) for r in results if r.id != "diag.fatal_signal"]


def _new(engine: str, data: bytes, name: str) -> list:  # type: ignore[type-arg]
    from ddp_doctor.diagnose import blockscan, catalogue
    from ddp_doctor.diagnose.engine import Matcher
    from ddp_doctor.diagnose.logread import Stats

    matcher = Matcher(catalogue.load())
    table = patterns.table()
    for hit in blockscan.scan(io.BytesIO(data), patterns.engine(engine), Stats(), name=name, chunk=1 << 16):
        matcher.line(
            name, hit.lineno, hit.text.decode("utf-8", "replace"), None if hit.context else table.owners_of(hit.ids)
        )
    return matcher.results(unknown=True, harmless=False)


def test_the_corpus_is_not_empty() -> None:
    assert len(CORPUS) >= 15


@pytest.mark.parametrize("engine", available())
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_same_findings_as_the_line_reader(engine: str, path: Path) -> None:
    data = path.read_bytes()
    old = _findings(legacy_explain_stream(io.BytesIO(data), path.name))
    assert _findings(_new(engine, data, path.name)) == old
