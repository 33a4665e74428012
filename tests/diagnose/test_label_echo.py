"""Label honesty: no `cause` pattern of the real corpus matches its own log, so quoting the log is never judged right.

An answer that merely echoes a line of the log (a file being loaded, the exception's own words) must not pass for
knowing the cause. A pattern that matches text of its own log (ignoring case) is echo-able. The one exception is a
label marked `echo_ok`: the log itself states the cause in the thread's own words (an error message that IS the
cause); such a label must carry the catalogue id that names it, and the judge accepts only that id for it.
"""

from __future__ import annotations

from tests.fixtures.logs.real import corpus

LABELS = corpus.load()


def test_no_label_pattern_matches_its_own_log() -> None:
    echoing = {n: corpus.echoed(n, label) for n, label in LABELS.items() if "echo_ok" not in label}
    assert {n: pats for n, pats in echoing.items() if pats} == {}


def test_an_allowed_echo_is_justified_named_by_id_and_still_needed() -> None:
    for name, label in LABELS.items():
        if "echo_ok" not in label:
            continue
        assert label["verdict"] == "fail" and label.get("root_cause"), f"{name}: echo_ok needs a root_cause id"
        assert str(label["echo_ok"]).strip(), f"{name}: echo_ok must say why the log states the cause"
        assert corpus.echoed(name, label), f"{name}: echo_ok, but no pattern matches the log any more"


def test_the_judge_takes_only_the_id_for_an_allowed_echo() -> None:
    label = {"verdict": "fail", "cause": ["out of memory"], "root_cause": "diag.cuda_oom", "echo_ok": "OOM"}
    echo = corpus.answer(
        {
            "root_cause": "diag.unknown",
            "results": [{"id": "diag.unknown", "status": "fail", "summary": "out of memory"}],
        }
    )
    named = corpus.answer({"root_cause": "diag.cuda_oom", "results": [{"id": "diag.cuda_oom", "status": "fail"}]})
    assert not corpus.judge(label, echo).right
    assert corpus.judge(label, named).right
    assert corpus.judge({k: v for k, v in label.items() if k != "echo_ok"}, echo).right
