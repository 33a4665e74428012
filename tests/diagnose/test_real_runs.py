"""Real failing runs (real torchrun, CPU, gloo) -> explain names the right signature, root cause first."""

from __future__ import annotations

import pytest

from ddp_doctor.diagnose import diagnose, explain_text
from ddp_doctor.report import Status
from tests.diagnose import realruns

CASES = [
    pytest.param(c, marks=pytest.mark.root) if c in realruns.CASES and realruns.CASES[c].needs_root else c
    for c in realruns.ALL
]


@pytest.mark.parametrize("case", CASES)
def test_real_failure_is_named(case: str) -> None:
    text, code = realruns.run_case(case)
    if not realruns.ROOT_CAUSE[case]:  # the healthy run
        assert code == 0, text[-2000:]
        assert len(text.splitlines()) > 50  # it did log a lot
        assert diagnose({"ok.log": text.splitlines()}, {"launcher": code}, unknown=True) == []
        assert not [r.id for r in explain_text(text, "ok.log") if r.status is not Status.PASS]
        return
    if case in realruns.CASES and realruns.CASES[case].hangs_s:
        assert code is None, f"the run was expected to hang, got exit {code}:\n{text[-2000:]}"
    else:
        assert code not in (0, None), f"the run was expected to fail on its own, got exit {code}:\n{text[-2000:]}"
    results = explain_text(text, f"{case}.log", {"launcher": code} if code is not None else {})
    ids = [r.id for r in results]
    assert ids and ids[0] == realruns.ROOT_CAUSE[case], f"{ids}\n{text[-3000:]}"
    if ids[0] == "diag.master_retry":  # a warning once; repeated until the user stopped the job, a failure
        assert results[0].status is Status.FAIL, results[0]
    assert results[0].evidence and results[0].evidence[0].line is not None
