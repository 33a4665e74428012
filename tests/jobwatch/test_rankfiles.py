"""rank-N.pid and rank-N.exit: one record each, written by the startup hook in the job's own interpreter
and read back by the doctor; a torn or foreign file is named with why, never read as half a record."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_doctor.jobwatch import envplan
from ddp_doctor.jobwatch.hook import ddp_doctor_rankfiles as rankfiles
from ddp_doctor.jobwatch.hook.ddp_doctor_rankfiles import NotARecord, RankExit, RankPid
from ddp_doctor.jobwatch.results import build_report
from ddp_doctor.jobwatch.supervise import WatchOutcome
from ddp_doctor.report import Status
from ddp_doctor.rundir import reader


def test_both_records_round_trip(tmp_path: Path) -> None:
    pid = RankPid(3, 1234, ("train.py", "--lr", "0.1"), 17.5, 4)
    end = RankExit("exception", "ValueError: bad", 18.0)
    rankfiles.write(str(tmp_path), "rank-3", "pid", pid)
    rankfiles.write(str(tmp_path), "rank-3", "exit", end)
    assert reader.read_hook_files(tmp_path, "pid", RankPid.from_json).records == {3: pid}
    assert reader.read_hook_files(tmp_path, "exit", RankExit.from_json).records == {3: end}
    assert sorted(os.listdir(tmp_path)) == ["rank-3.exit", "rank-3.pid"]  # no .tmp left behind


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"rank": 0, "pid": 12', "is not JSON (cut short"),
        ("[1, 2]", "is JSON but not an object: list"),
        ('{"rank": 0, "argv": [], "time": 1.0}', "field 'pid' is None, not an integer"),
        ('{"rank": 0, "pid": true, "argv": [], "time": 1.0}', "field 'pid' is True, not an integer"),
        ('{"rank": 0, "pid": 5, "argv": "x", "time": 1.0}', "field 'argv' is 'x', not a list"),
        ('{"rank": 0, "pid": 5, "argv": [], "time": 1.0, "world_size": "2"}', "'world_size' is '2', not int or null"),
    ],
)
def test_a_pid_file_that_is_no_record_says_why(text: str, why: str) -> None:
    with pytest.raises(NotARecord, match=why.replace("(", r"\(").replace("[", r"\[")):
        RankPid.from_json(text, "rank-0.pid")


def test_an_exit_file_of_another_shape_says_why(tmp_path: Path) -> None:
    (tmp_path / "rank-0.exit").write_text('{"kind": "crashed", "time": 1.0}')
    (tmp_path / "rank-1.exit").write_text('{"kind": "exit", "detail": null, "time": 2}')
    found = reader.read_hook_files(tmp_path, "exit", RankExit.from_json)
    assert found.records == {1: RankExit("exit", None, 2.0)}
    assert found.unreadable == {"rank-0.exit": "rank-0.exit field 'kind' is 'crashed', not one of exit, exception"}


def test_the_hook_module_needs_only_the_standard_library() -> None:
    # The job's interpreter may not have ddp_doctor installed: the hook imports this file by its own name.
    tree = ast.parse(Path(rankfiles.__file__).read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def _hooked(tmp_path: Path, code: str) -> Path:
    """Run `code` as a lone rank under the startup hook (as `ddp-doctor run -- python x.py` does), with
    ddp_doctor itself off the path (-I would drop PYTHONPATH too, so a bare copy of the hook's directory)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "PYTHONPATH")}
    env |= {"PYTHONPATH": envplan.HOOK_DIR, "DDP_DOCTOR_WATCH_DIR": str(run_dir), "DDP_DOCTOR_WATCH_LONE": "1"}
    env |= {"DDP_DOCTOR_WATCH_ERROR_FILE": "0", "PYTHONNOUSERSITE": "1"}
    # The base interpreter, not this venv's: it has no ddp_doctor, as a job's own interpreter may not.
    subprocess.run(
        [getattr(sys, "_base_executable", sys.executable), "-c", code], env=env, cwd=tmp_path, timeout=60, check=False
    )
    return run_dir


@pytest.mark.slow
def test_a_real_rank_writes_records_the_doctor_reads(tmp_path: Path) -> None:
    run_dir = _hooked(tmp_path, "import ddp_doctor_rankfiles, sys; assert 'ddp_doctor' not in sys.modules")
    pids = reader.read_hook_files(run_dir, "pid", RankPid.from_json)
    exits = reader.read_hook_files(run_dir, "exit", RankExit.from_json)
    assert pids.unreadable == {} and exits.unreadable == {}
    assert pids.records[0].rank == 0 and pids.records[0].argv == ("-c",)
    assert exits.records[0].kind == "exit" and exits.records[0].detail is None


@pytest.mark.slow
def test_a_real_rank_that_raises_leaves_the_exception_line(tmp_path: Path) -> None:
    run_dir = _hooked(tmp_path, "raise KeyError('missing')")
    exits = reader.read_hook_files(run_dir, "exit", RankExit.from_json)
    assert exits.records[0] == RankExit("exception", "KeyError: 'missing'", exits.records[0].time)


def test_the_report_names_a_foreign_hook_file_and_does_not_pass(tmp_path: Path) -> None:
    rankfiles.write(str(tmp_path), "rank-0", "pid", RankPid(0, 99999999, ("x.py",), 1.0, 2))
    rankfiles.write(str(tmp_path), "rank-0", "exit", RankExit("exit", None, 2.0))
    (tmp_path / "rank-1.exit").write_text("not json")
    out = WatchOutcome(command=("python", "x.py"), run_dir=tmp_path, returncode=0, started_epoch=0.0)
    out.ranks[0] = RankPid.from_json((tmp_path / "rank-0.pid").read_text())
    out.unreadable["rank-1.pid"] = "rank-1.pid is JSON but not an object: list"
    report = build_report(out)
    job = next(r for r in report.results if r.id == "run.job")
    assert job.status is Status.WARN
    assert "2 files of the startup hook unreadable (rank-1.exit, rank-1.pid)" in job.summary
    assert [e.source for e in job.evidence] == ["rank-1.exit", "rank-1.pid"]
    assert report.facts["run"]["ranks"]["0"]["end"] == "exit"
    assert sorted(report.facts["run"]["unreadable"]) == ["rank-1.exit", "rank-1.pid"]


def test_every_hook_file_read_whole_passes(tmp_path: Path) -> None:
    rankfiles.write(str(tmp_path), "rank-0", "pid", RankPid(0, 99999999, ("x.py",), 1.0, 1))
    rankfiles.write(str(tmp_path), "rank-0", "exit", RankExit("exit", None, 2.0))
    out = WatchOutcome(command=("python", "x.py"), run_dir=tmp_path, returncode=0, started_epoch=0.0)
    out.ranks[0] = RankPid.from_json((tmp_path / "rank-0.pid").read_text())
    job = next(r for r in build_report(out).results if r.id == "run.job")
    assert job.status is Status.PASS and job.evidence == [] and "unreadable" not in job.summary
