"""The real explain corpus's shape: every log labelled from its thread, in the part the blind rule says.

The rule and the schema are in tests/fixtures/logs/real/README.md and LABELS.yaml's header; the scores are
printed by benchmarks/score_explain_corpus.py.
"""

from __future__ import annotations

import collections
import re

from ddp_doctor.diagnose import catalogue
from tests.fixtures.logs.real import corpus

LABELS = corpus.load()
NEUTRAL_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*-\d+(-\d+)?\.log$")
"""New logs are named repository-thread[-n].log: nothing in the name says what went wrong."""

# The corpus grows toward 250 logs from 120 repositories with 40 healthy runs; these floors rise with it.
AT_LEAST = {"logs": 467, "repositories": 290, "healthy": 114}


def test_every_log_has_a_label_and_every_label_a_log() -> None:
    assert sorted(p.name for p in corpus.HERE.glob("*.log")) == sorted(LABELS)


def test_every_label_has_its_source_conclusion_and_class() -> None:
    for name, label in LABELS.items():
        assert corpus.SOURCE.match(str(label["source"])), name
        assert str(label["confirmed"]).strip(), name
        assert str(label["class"]).strip(), name


def test_every_label_says_what_a_right_answer_is() -> None:
    known = set(catalogue.by_id())
    for name, label in LABELS.items():
        assert label["verdict"] in corpus.VERDICTS, name
        if label["verdict"] == "healthy":
            assert label.get("root_cause") is None and not label.get("cause") and "first_rank" not in label, name
            continue
        assert label["cause"], f"{name}: a failure needs cause patterns"
        for pattern in label["cause"]:
            re.compile(pattern, re.IGNORECASE)
            assert not re.search(pattern, "", re.IGNORECASE), f"{name}: {pattern!r} matches any answer"
        if label.get("root_cause") is not None:
            assert label["root_cause"] in known, name
        if "first_rank" in label:
            assert isinstance(label["first_rank"], int) and label["first_rank"] >= 0, name


def test_every_log_is_in_the_part_the_rule_says() -> None:
    for name, label in LABELS.items():
        if "part" not in label:
            assert "fitted_why" not in label, name
            continue
        # The one allowed move: a log the rule puts in the blind part kept fitted, because it was read before the
        # rule existed (history), because it was a blind miss whose class of knowledge has since been added, or
        # because someone writing signatures saw it (seen): it no longer measures an unseen log.
        assert label["part"] == "fitted", name
        assert corpus.blind_by_rule(name), f"{name}: already fitted by the rule"
        why = str(label.get("fitted_why", ""))
        assert why.startswith("history") == (name in corpus.HISTORY), name
        assert name in corpus.HISTORY or why.startswith(("blind miss fixed", "seen: ")), name


def test_names_do_not_carry_the_answer() -> None:
    # The first 63 logs kept their descriptive names; all of them are in the fitted part.
    for name, label in LABELS.items():
        assert NEUTRAL_NAME.match(name) or (name in corpus.FIRST and corpus.part(name, label) == "fitted"), name
    assert corpus.FIRST <= set(LABELS) and len(corpus.FIRST) == 63


def test_no_thread_is_in_the_corpus_twice() -> None:
    threads = collections.Counter(corpus.thread(str(label["source"])) for label in LABELS.values())
    assert [t for t, n in threads.items() if n > 1] == []


def test_the_corpus_is_as_big_and_as_spread_as_promised() -> None:
    repos = {corpus.repository(str(label["source"])) for label in LABELS.values()}
    healthy = [n for n, label in LABELS.items() if label["verdict"] == "healthy"]
    assert len(LABELS) >= AT_LEAST["logs"]
    assert len(repos) >= AT_LEAST["repositories"]
    assert len(healthy) >= AT_LEAST["healthy"]


def test_both_parts_hold_failures_and_healthy_runs_once_grown() -> None:
    parts = collections.Counter((corpus.part(n, label), label["verdict"]) for n, label in LABELS.items())
    if len(LABELS) > 63:
        assert all(parts[(p, v)] > 0 for p in ("blind", "fitted") for v in corpus.VERDICTS), parts


def test_the_judge_reads_an_answer_as_the_scorer_does() -> None:
    failing = {"verdict": "fail", "cause": ["shared memory|/dev/shm"], "root_cause": "diag.shm_exhausted"}
    said = corpus.answer(
        {
            "headline": "Root cause: something",
            "root_cause": "diag.unknown",
            "results": [
                {"id": "diag.unknown", "status": "fail", "summary": "x", "cause": "/dev/shm is full", "rank": 1},
                {"id": "diag.harmless.omp_threads", "status": "pass", "summary": "shared memory"},
            ],
        }
    )
    assert corpus.judge(failing, said).right
    assert not corpus.judge({**failing, "first_rank": 0}, said).right
    assert corpus.judge({**failing, "first_rank": 1}, said).right
    assert not corpus.judge({"verdict": "healthy"}, said).right
    only_pass = corpus.answer({"headline": "shared memory", "root_cause": None, "results": []})
    assert not corpus.judge(failing, only_pass).right
    assert corpus.judge({"verdict": "healthy"}, only_pass).right
    by_id = corpus.answer(
        {"root_cause": "diag.shm_exhausted", "results": [{"id": "diag.shm_exhausted", "status": "fail"}]}
    )
    assert corpus.judge(failing, by_id).right
    # three outcomes: a WARN on a failure is wrong but not "called healthy"; on a healthy run it is right
    warned = corpus.answer({"verdict": "warn", "root_cause": None, "results": [{"id": "diag.hang", "status": "warn"}]})
    assert corpus.judge(failing, warned) == corpus.Judgement(False, corpus.LEFT_AT_WARN)
    assert corpus.judge({"verdict": "healthy"}, warned) == corpus.Judgement(True, corpus.HEALTHY_WARNED)
    assert corpus.judge(failing, only_pass) == corpus.Judgement(False, corpus.CALLED_HEALTHY)
