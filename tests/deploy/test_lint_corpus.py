"""The lint corpus: real configs from public repositories, labelled by hand (labels.yaml).

Both directions on every file: each labelled pitfall is reported, no error-level finding is one the
labels call wrong or is outside the labelled pitfalls, and no file crashes the linter.
"""

from __future__ import annotations

import json

import pytest
import yaml

from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.deploy.lint.rules import catalogue
from tests.conftest import FIXTURES, run_cli

CORPUS = FIXTURES / "lint-corpus"
LABELS: dict[str, dict[str, list[str]]] = yaml.safe_load((CORPUS / "labels.yaml").read_text())
FILES = sorted(p.name for p in CORPUS.iterdir() if p.name not in ("README.md", "labels.yaml"))


def test_corpus_is_big_labelled_and_sourced() -> None:
    assert len(FILES) >= 40
    assert sorted(LABELS) == FILES, "every corpus file has labels, every label a file"
    readme = (CORPUS / "README.md").read_text()
    for name in FILES:
        assert f"`{name}`" in readme, f"{name} has no source in README.md"
    known = set(catalogue())
    for name, label in LABELS.items():
        for rule in label["pitfalls"] + label["wrong"]:
            assert rule in known, (name, rule)
        assert not set(label["pitfalls"]) & set(label["wrong"]), name


@pytest.mark.parametrize("name", FILES)
def test_corpus_file(name: str) -> None:
    label = LABELS[name]
    found = lint_file(str(CORPUS / name))
    rules = {r.id.split(".")[-1] for r in found.results}
    missed = set(label["pitfalls"]) - rules
    assert not missed, f"{name}: labelled pitfalls not reported: {sorted(missed)}"
    errors = {r.id.split(".")[-1] for r in found.results if r.observed.get("severity") == "error"}
    wrong = errors & set(label["wrong"])
    assert not wrong, f"{name}: error findings the labels call wrong: {sorted(wrong)}"
    unlabelled = errors - set(label["pitfalls"])
    assert not unlabelled, f"{name}: error findings that are not labelled pitfalls: {sorted(unlabelled)}"
    for r in found.results:
        line = r.evidence[0].line or 0
        assert 1 <= line <= (CORPUS / name).read_text().count("\n") + 1, (name, r.id, line)


def test_the_whole_corpus_through_the_cli() -> None:
    """As a CI job runs it: every file in one call, SARIF out, exit 1 for the real errors, nothing on stderr."""
    proc = run_cli("lint", "--format", "sarif", *(str(CORPUS / n) for n in FILES), timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    run = json.loads(proc.stdout)["runs"][0]
    levels = {r["level"] for r in run["results"]}
    assert levels == {"error", "warning", "note"}
    errors = {
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].rsplit("/", 1)[-1],
            r["ruleId"].split(".")[-1],
        )
        for r in run["results"]
        if r["level"] == "error"
    }
    assert errors <= {(name, rule) for name, label in LABELS.items() for rule in label["pitfalls"]}


def corpus_score() -> tuple[int, int, int]:
    """(labelled pitfalls found, labelled pitfalls, error findings the labels call wrong or do not label)."""
    found = total = wrong = 0
    for name in FILES:
        label = LABELS[name]
        results = lint_file(str(CORPUS / name)).results
        rules = {r.id.split(".")[-1] for r in results}
        total += len(label["pitfalls"])
        found += len(set(label["pitfalls"]) & rules)
        errors = {r.id.split(".")[-1] for r in results if r.observed.get("severity") == "error"}
        wrong += len(errors - set(label["pitfalls"]))
    return found, total, wrong


if __name__ == "__main__":
    hit, labelled, bad = corpus_score()
    print(f"lint corpus: {len(FILES)} files, {hit}/{labelled} labelled pitfalls found, {bad} wrong error findings")
