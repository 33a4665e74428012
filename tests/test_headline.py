"""The headline and the folded text: what a person reads first, judged on made and recorded reports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ddp_doctor.render import render
from ddp_doctor.render.folding import fold_summaries
from ddp_doctor.render.headline import _first_sentence, compose, headline
from ddp_doctor.report import Report, Result, Status
from tests.conftest import FIXTURES, run_cli

GPU_LIVE = FIXTURES / "gpu" / "live" / "report.json"
EXPERIENCE = FIXTURES / "gpu" / "experience"


def _live_report(world: int = 2, fail_rank: int | None = None) -> Report:
    report = Report(command="check", target={"host": "vm"})
    report.facts = {
        "gpus": {"count": 0},
        "live": {
            "backend": "gloo",
            "world_size": world,
            "nnodes": "1",
            "devices": {str(r): {"type": "cpu"} for r in range(world)},
            "phases": {str(r): {"init": "pass", "ddp": "fail" if r == fail_rank else "pass"} for r in range(world)},
        },
    }
    report.add(Result("env.gpus", "GPUs", Status.SKIP, "no NVIDIA driver"))
    report.add(Result("live.launch", "torchrun", Status.PASS, f"launched {world} ranks"))
    for r in range(world):
        report.add(
            Result("live.init", "init", Status.PASS, f"rank {r}: 5 checks passed in {7 + r}.{r} s", rank=r, node="vm")
        )
    for r in range(world):
        if r == fail_rank:
            report.add(
                Result(
                    "live.ddp",
                    "ddp",
                    Status.FAIL,
                    f"rank {r}: parameters differ",
                    cause="a rank skipped the all-reduce",
                    remedy="make every rank run the same backward",
                    rank=r,
                    node="vm",
                )
            )
        else:
            report.add(Result("live.ddp", "ddp", Status.PASS, f"rank {r}: 3 checks passed in 0.5 s", rank=r, node="vm"))
    report.add(Result("live.ddp.loss", "loss", Status.PASS, "loss falls (all ranks agree)"))
    report.add(Result("live.init.join", "join", Status.PASS, "2 of 2 ranks joined (all ranks agree)"))
    return report


def test_cpu_headline_says_what_was_and_was_not_verified() -> None:
    text = compose(_live_report())
    assert text.startswith(
        "Distributed training works here on CPU: 2 gloo ranks ran init_process_group and DDP training."
    )
    assert text.endswith("GPU training was not verified: no NVIDIA GPU is visible.")


def test_failure_headline_names_the_check_and_the_rank() -> None:
    report = _live_report(fail_rank=1)
    report.root_cause = "live.ddp"
    text = compose(report)
    assert text.startswith("Distributed training does not work here: DDP training on rank 1 failed: parameters differ.")
    assert "Before it, init_process_group passed." in text


def test_ranks_fold_into_one_row_and_verbose_shows_each() -> None:
    report = _live_report(fail_rank=1)
    folded = render(report, "text")
    row = next(line for line in folded.splitlines() if line.startswith("✔ PASS  live.init "))
    assert "2/2 ranks" in row and "5 checks passed in 7.0–8.1 s" in row
    ddp = next(line for line in folded.splitlines() if line.startswith("✘ FAIL  live.ddp "))
    assert "1/2 ranks" in ddp and "parameters differ" in ddp
    # the failure in full, with where, cause and remedy
    assert "  where:  rank 1\n" in folded
    assert (
        "  cause:  a rank skipped the all-reduce" in folded
        and "  remedy: make every rank run the same backward" in folded
    )
    assert "live.ddp.loss" not in folded and "live.init.join" not in folded  # passing sub-checks fold into the phase
    verbose = render(report, "text", verbose=True)
    assert sum(1 for line in verbose.splitlines() if line.startswith("✔ PASS  live.init ")) == 2
    assert "rank 0" in verbose and "rank 1" in verbose and "live.ddp.loss" in verbose


def test_fold_summaries_merges_numbers_only_when_the_words_agree() -> None:
    assert fold_summaries(["rank 0: 1 check passed in 3.0 s", "rank 1: 1 check passed in 3.5 s"]) == (
        "1 check passed in 3.0–3.5 s"
    )
    assert fold_summaries(["rank 0: timed out", "rank 1: crashed"]) is None


def test_float_noise_never_reaches_the_text() -> None:
    report = Report(command="check", target={"host": "vm"})
    report.add(
        Result(
            "live.balance.straggler",
            "straggler",
            Status.WARN,
            "rank 1 computes 17% slower than the median rank (3.271 vs 2.8064999999999998 ms); expected within 15%",
        )
    )
    for fmt in ("text", "markdown", "html"):
        out = " ".join(render(report, fmt).split())  # the text wraps at the screen's width
        assert "2.8064999999999998" not in out and "3.271 vs 2.8065 ms" in out, fmt


def test_counts_have_words_and_plurals() -> None:
    report = _live_report()
    line = next(x for x in render(report, "text").splitlines() if "verdict:" in x)
    assert "(1 skipped, 7 passed;" in line
    report.add(Result("env.user", "user", Status.WARN, "root"))
    assert "1 warning, 1 skipped, 7 passed" in render(report, "text")


def test_the_same_sentence_heads_every_human_format_and_the_json(tmp_path: Path) -> None:
    report = _live_report()
    report.headline = compose(report)
    assert json.loads(render(report, "json"))["headline"] == report.headline
    assert render(report, "text").splitlines()[0] == report.headline[: len(render(report, "text").splitlines()[0])]
    assert f"**{report.headline}**" in render(report, "markdown")
    assert f'<p class="headline"><strong>{report.headline}</strong></p>' in render(report, "html")


def test_an_old_report_without_the_field_still_renders_with_its_headline(tmp_path: Path) -> None:
    data = _live_report().to_dict()
    del data["headline"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    proc = run_cli("render", str(path), "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    assert "**Distributed training works here on CPU" in proc.stdout


def test_recorded_h200_report_says_nccl_on_the_gpu_was_verified() -> None:
    """A real one-H200 run (gpu/live.sh), its headline made again from the recorded results."""
    report = Report.from_dict(json.loads(GPU_LIVE.read_text()))
    text = headline(report)
    assert report.headline in (None, text)  # a recording made with a headline says what is made again now
    assert text.startswith("Distributed training works here on GPU: 1 NCCL rank on 1 × NVIDIA H200 ran ")
    assert text.endswith("NCCL on the GPU was verified.")


def test_experience_fixture_headline_from_the_gpu_machine() -> None:
    """gpu/experience.sh records `check --format json` and the default text on the lent H200."""
    report_path, text_path = EXPERIENCE / "check.json", EXPERIENCE / "check.txt"
    if not report_path.exists():
        pytest.skip(f"fixture missing: run gpu/experience.sh on the GPU machine to record {report_path}")
    data = json.loads(report_path.read_text())
    assert data["headline"].startswith("Distributed training works here on GPU: ")
    assert data["headline"].endswith("NCCL on the GPU was verified.")
    assert compose(Report.from_dict(data)) == data["headline"]  # the field is what the model says
    text = text_path.read_text().splitlines()
    assert text[0].startswith("Distributed training works here on GPU")
    assert len(text) <= 50


def test_lint_with_no_findings_says_so(tmp_path: Path) -> None:
    clean = tmp_path / "Dockerfile"
    clean.write_text("FROM python:3.11\nUSER 1000\n")
    proc = run_cli("lint", str(clean))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "No findings in 1 file."
    assert "(; " not in proc.stdout and "status  check" not in proc.stdout  # no empty count, no empty table


def test_lint_of_a_missing_file_is_an_input_error_in_text_and_exit_code(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent.yaml"
    proc = run_cli("lint", str(missing))
    assert proc.returncode == 2
    assert proc.stdout == "" and "verdict: FAIL" not in proc.stdout
    assert proc.stderr.strip() == f"ddp-doctor: error: {missing}: cannot read: No such file or directory"


def test_explain_names_every_rank_the_same_way() -> None:
    proc = run_cli("explain", str(FIXTURES / "logs" / "cpu-sigkill-rank.log"))
    assert proc.returncode == 1, proc.stderr
    rows = [x for x in proc.stdout.splitlines() if x[:1] in "✘!✔?i" and x[2:6] in ("FAIL", "WARN", "PASS")]
    assert rows, proc.stdout
    # one notation: 'rank N' or 'rank N on NODE' in the where column; never 'localhost/1' beside a bare '0'
    assert not any(re.search(r"\s\S+/\d+\s", x) for x in rows), rows
    assert any(re.search(r"\srank 1 on localhost(\s|$)", x) for x in rows) and any(
        re.search(r"\srank 0(\s|$)", x) for x in rows
    )
    pods = run_cli("explain", str(FIXTURES / "logs" / "k8s-two-pods.log")).stdout
    assert "rank 1 on bert-worker-0" in pods and "bert-worker-0/1" not in pods


@pytest.mark.parametrize(
    ("log", "says"),
    [
        # a healthy run's paste that stops in NCCL's start-up lines: a hang, or the start of the log
        (
            "nccl-352-healthy-socket-lo.log",
            r"but the log ends during NCCL's start-up lines .* a hang, or only the start",
        ),
        # one c10d retry warning: named, not called healthy
        ("jobset-603.log", r"but a rank retries reaching the rendezvous master"),
    ],
)
def test_an_explain_warning_leads_with_what_may_be_wrong(log: str, says: str) -> None:
    proc = run_cli("explain", "--format", "json", str(FIXTURES / "logs" / "real" / log))
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["verdict"] == "warn", proc.stderr
    assert report["headline"].startswith("No error in "), report["headline"]
    assert re.search(says, report["headline"]), report["headline"]
    assert "No known failure" not in report["headline"]


def test_bench_counts_one_rank_as_one_rank() -> None:
    """The recorded one-H200 sweep (gpu/bench.sh) rendered again: its tables say '1 rank'."""
    proc = run_cli("render", str(FIXTURES / "gpu" / "bench" / "bench.json"))
    assert "# bench.all_reduce: all_reduce, fp32, 1 rank, nccl" in proc.stdout
    assert not any(line.startswith("#") and "1 ranks" in line for line in proc.stdout.splitlines())


def test_a_long_exception_message_ends_at_its_first_sentence_in_the_headline() -> None:
    # Recorded on the H200 (gpu/run_failures.sh): DDP's message runs on for sentences and wraps after 'and by'.
    report = Report.from_dict(json.loads((FIXTURES / "gpu" / "run_failures" / "unused.json").read_text()))
    line = compose(report)
    assert (
        "raised RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one, in the forward pass"
        in line
    ), line
    assert "and by" not in line, line


def test_a_long_message_without_spaces_is_cut_not_dropped_a_character() -> None:
    cut = _first_sentence("OSError: " + "x" * 300)
    assert cut.startswith("OSError: xxx") and cut.endswith("…") and len(cut) == len("OSError: ") + 160 + 1, cut
