"""The lint corpus: real configs from public repositories, labelled by hand with tool-neutral pitfalls.

The corpus's shape is checked on every file (sources, labels, vocabulary, parts by the blind rule). What lint
says is asserted on the fitted part only: each labelled pitfall reported, no false error, every file read. The
blind part is never linted here; benchmarks/score_lint_corpus.py scores both parts.
"""

from __future__ import annotations

import json

import pytest

from ddp_doctor.deploy.lint.rules import catalogue
from tests.conftest import run_cli
from tests.deploy import lint_corpus as corpus

VOCAB = corpus.pitfalls()
LABELS = corpus.labels()
FILES = corpus.files()
HISTORY = corpus.fitted_by_history()
FITTED = [name for name in FILES if LABELS[name].part == "fitted"]

FITTED_GAPS: dict[str, str] = {
    "dle-transformer-xl-run.sub": "a Slurm GPU job behind a script of its own (bash run_*.sh under srun): slurm_gpus_implicit",
    "llamafactory-docker-cuda.Dockerfile": "COPY . of a repository with a data directory: data_in_image",
    "skypilot-detectron2-docker.yaml": "a training command in the task's container not read as a launcher: ranks_below_gpus",
    "shuai-xie-mnist-pytorchjob.Dockerfile": "COPY . of a repository with a data directory: data_in_image",
    "nncv-fun5go-jobscript_slurm.sh": (
        "GPUs granted to one Slurm task that runs a script the config does not show (bash main.sh in apptainer), "
        "whose trainer uses one device: ranks_below_gpus"
    ),
    "boletteeh-mlops-train_ddp.slurm": (
        "a training script that starts its own ranks (torch.multiprocessing.spawn over every GPU) run under torchrun, "
        "which starts ranks too: ranks_exceed_gpus"
    ),
    "open-orca-ru-docker-compose-train.yml": (
        "a compose service with no GPU reservation whose command runs a GPU trainer through a script the config does "
        "not show: gpus_not_requested"
    ),
    "mllib-argo-train-workflow.yaml": (
        "an Argo container template with no resources running a GPU training image (the project runs it with "
        "--gpus all elsewhere): gpus_not_requested"
    ),
    "tigris-sdxl-skyserve.yaml": "a SkyPilot task run in a docker image_id whose user is root: runs_as_root",
    "dna-interaction-foundation-train-job.yaml": (
        "a one-rank pod on the default 64 MiB /dev/shm whose trainer, a script the config runs but does not show, "
        "uses DataLoader workers: shm_too_small"
    ),
    "neucom-fedpod-argo-workflow.yaml": (
        "an Argo step whose script (not in the config) starts one rank per GPU it is given (-W = the pod's GPU count) "
        "on the default 64 MiB /dev/shm: shm_too_small"
    ),
}
"""Fitted files lint does not get right yet, with what is missing (strict xfail: a fix makes the test say so,
and the entry goes). Each is a class of knowledge to add, not a file to fit."""


def test_every_file_is_sourced_and_labelled() -> None:
    assert len(FILES) >= 150
    assert sorted(LABELS) == FILES, "every corpus file has labels, every label a file"
    sources = corpus.sources()
    assert sorted(sources) == FILES, "every file has one row (repository, path, commit) in README.md"
    formats = {label.format for label in LABELS.values()}
    assert len(formats) >= 12, formats
    for name, label in LABELS.items():
        for pid in label.pitfalls + label.clean:
            assert pid in VOCAB, (name, pid)
        assert not set(label.pitfalls) & set(label.clean), name
        assert len(set(label.pitfalls)) == len(label.pitfalls) and len(set(label.clean)) == len(label.clean), name
        assert label.why, name


def test_every_file_is_in_the_part_the_rule_says() -> None:
    assert HISTORY <= set(FILES), HISTORY - set(FILES)
    assert all(corpus.blind_by_rule(n) for n in HISTORY), "only files the rule makes blind need the history list"
    for name, label in LABELS.items():
        assert label.part == corpus.part_of(name, HISTORY), name
    blind = [n for n in FILES if LABELS[n].part == "blind"]
    assert len(blind) >= 0.2 * len(FILES), "the blind part never shrinks below a fifth of the corpus"


def test_the_vocabulary_is_defined_sourced_and_mapped_to_real_rules() -> None:
    rules = catalogue()
    ids = {f"lint.{area}.{name}" for name, rule in rules.items() for area in rule.areas}
    for pid, p in VOCAB.items():
        assert p.severity in corpus.SEVERITIES, pid
        assert p.definition and p.source.startswith("http"), pid
        for r in p.rules:
            assert r in rules or r in ids, (pid, r)
    assert {p.severity for p in VOCAB.values()} == set(corpus.SEVERITIES)


def test_the_judge_counts_what_it_should() -> None:
    """A reported pitfall is found at any severity; an error no labelled pitfall accounts for is false, and is
    marked when it falls on a clean point; a warning on a clean point is counted apart."""
    from ddp_doctor.report import Result, Status

    def finding(rule_id: str, severity: str) -> Result:
        status = {"error": Status.FAIL, "warning": Status.WARN}[severity]
        return Result(id=rule_id, title="t", status=status, summary="s", observed={"severity": severity, "line": 3})

    label = corpus.Label(
        "x.sh", "fitted", "slurm", ("world_size_mismatch", "image_unpinned"), ("gpus_not_requested",), "w"
    )
    out = corpus.judge(
        label,
        VOCAB,
        [
            finding("lint.slurm.nnodes_mismatch", "warning"),
            finding("lint.slurm.slurm_gpus_missing", "error"),
            finding("lint.slurm.tasks_per_node", "error"),
            finding("lint.k8s.gpu_limit_missing", "warning"),
        ],
        None,
    )
    assert out.found == ("world_size_mismatch",) and out.missed == ("image_unpinned",)
    assert out.false_errors == (
        "lint.slurm.slurm_gpus_missing@3 (on a clean point: gpus_not_requested)",
        "lint.slurm.tasks_per_node@3",
    )
    assert out.warned_clean == ("lint.k8s.gpu_limit_missing@3: gpus_not_requested",)
    unread = corpus.judge(label, VOCAB, None, "x.sh: not a config")
    assert unread.unread and unread.missed == label.pitfalls and unread.found == ()


def _fitted_params() -> list[object]:
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=FITTED_GAPS[n])) if n in FITTED_GAPS else n
        for n in FITTED
    ]


@pytest.mark.parametrize("name", _fitted_params())
def test_fitted_file(name: str) -> None:
    out = corpus.lint_one(LABELS[name], VOCAB)
    assert out.unread is None, f"{name}: not read: {out.unread}"
    assert not out.missed, f"{name}: labelled pitfalls not reported: {list(out.missed)}"
    assert not out.false_errors, f"{name}: false errors: {list(out.false_errors)}"


def test_the_fitted_part_through_the_cli() -> None:
    """As a CI job runs it: the fitted files lint reads in one call, SARIF out, exit 1 for the real errors,
    nothing on stderr, every error a labelled pitfall, every line inside its file."""
    names = [n for n in FITTED if n not in FITTED_GAPS]
    proc = run_cli("lint", "--format", "sarif", *(str(corpus.CORPUS / n) for n in names), timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    run = json.loads(proc.stdout)["runs"][0]
    assert {r["level"] for r in run["results"]} == {"error", "warning", "note"}
    for r in run["results"]:
        where = r["locations"][0]["physicalLocation"]
        name = where["artifactLocation"]["uri"].rsplit("/", 1)[-1]
        lines = (corpus.CORPUS / name).read_text().count("\n") + 1
        assert 1 <= where["region"]["startLine"] <= lines, (name, r["ruleId"])
        if r["level"] == "error":
            assert any(VOCAB[p].reported_by(r["ruleId"]) for p in LABELS[name].pitfalls), (name, r["ruleId"])
