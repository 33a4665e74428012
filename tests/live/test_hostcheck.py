"""check's facts make one trip: the host subject is built once (live/hostcheck.host_facts), judged
once, and the report's body is set in one place (hostcheck.assemble), with one node or several."""

from __future__ import annotations

import ast
from pathlib import Path

from ddp_doctor.checkconfig import CheckConfig
from ddp_doctor.live import hostcheck
from ddp_doctor.live.launch import TorchrunSpec
from ddp_doctor.live.nodestage import Conclusion, OneNode
from ddp_doctor.report import Report, Result, Status

SRC = Path(__file__).resolve().parents[2] / "src" / "ddp_doctor"


def test_the_ranks_torch_facts_replace_the_file_based_ones_and_the_config_is_recorded() -> None:
    static = {"torch": {"version": "2.5.0", "source": "files", "location": "/x"}, "shm": {"size": 1}}
    facts = hostcheck.host_facts(
        static,
        CheckConfig(expect_gpus=4),
        ranks_torch={"version": "2.5.0+cpu", "nccl_version": None},
        live={"world_size": 2},
        gpu_baseline={"driver_loaded": True},
    )
    assert facts["torch"] == {"version": "2.5.0+cpu", "source": "rank 0", "location": "/x", "nccl_version": None}
    assert facts["expect_gpus"] == 4
    assert facts["live"] == {"world_size": 2}
    assert facts["gpu_baseline"] == {"driver_loaded": True}
    assert facts["shm"] == {"size": 1}
    assert static["torch"]["source"] == "files"  # the gathered record is not changed underneath


def test_without_rank_facts_the_static_ones_stay() -> None:
    facts = hostcheck.host_facts({"torch": {"source": "import"}}, CheckConfig())
    assert facts == {"torch": {"source": "import"}, "expect_gpus": None}


def test_a_failed_gather_is_one_error_not_a_judgement_of_missing_facts() -> None:
    results = hostcheck.judge({"live": {}}, "it did not answer within 180 s")
    assert [(r.id, r.status) for r in results] == [("env.facts", Status.ERROR)]
    assert "did not answer within 180 s" in results[0].summary


def test_the_units_judge_the_recorded_facts_once_each() -> None:
    facts = hostcheck.host_facts({"target": {"source": "none"}}, CheckConfig())
    ids = [r.id for r in hostcheck.judge(facts)]
    assert ids and len(ids) == len(set(ids)), ids


def test_assemble_sets_the_body_and_keeps_the_header() -> None:
    report = Report.for_host("check")
    report.target["python"] = "/usr/bin/python3 (given)"
    fail = Result("live.init", "init", Status.FAIL, "rank 1 never joined")
    out = hostcheck.assemble(report, {"a": 1}, [fail], "live.init", headline="said")
    assert out is report and report.target["python"] == "/usr/bin/python3 (given)"
    assert (report.facts, report.results, report.root_cause, report.headline) == ({"a": 1}, [fail], "live.init", "said")


def test_one_node_adds_nothing_and_launches_the_spec_unchanged() -> None:
    stage = OneNode()
    spec = TorchrunSpec("ddp_doctor.live.worker", [], nproc=2, backend="gloo", timeout_s=10, env={})
    assert stage.blocked() is None
    assert stage.apply(spec) is spec
    with stage.watch():
        pass
    assert stage.conclude([], None, None) == Conclusion()  # type: ignore[arg-type]


def _assigns_report_body(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) else []
        )
        for t in targets:
            body = isinstance(t, ast.Attribute) and t.attr in ("facts", "results", "root_cause")
            if body and isinstance(t.value, ast.Name) and t.value.id == "report":  # type: ignore[attr-defined]
                found.append(f"{path.name}:{node.lineno}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if node.func.attr in ("add", "extend") and isinstance(owner, ast.Name) and owner.id == "report":
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_only_hostcheck_sets_a_check_reports_body() -> None:
    """The command, the chain and the multi-node stage hand their parts over; none of them changes the report."""
    paths = [SRC / "commands" / "check.py", *(SRC / "live").glob("*.py"), *(SRC / "live" / "multinode").glob("*.py")]
    found = [hit for p in paths if p.name != "hostcheck.py" for hit in _assigns_report_body(p)]
    assert not found, found
    assert _assigns_report_body(SRC / "live" / "hostcheck.py")  # the walk above finds what it looks for
