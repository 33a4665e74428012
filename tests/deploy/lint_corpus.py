"""The lint corpus: its files, the pitfall vocabulary, the labels, the two parts and how lint's answer is judged.

Shared by benchmarks/score_lint_corpus.py (the scores of both parts) and tests/deploy/test_lint_corpus.py (the
corpus's shape, and the fitted part asserted). The judge is tool-neutral on the label side: a file's labels name
pitfalls (pitfalls.yaml), and only the vocabulary's `rules` lists say which lint rules report which pitfall.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.errors import InputError
from ddp_doctor.report import Result

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "lint-corpus"
NOT_CONFIGS = frozenset({"README.md", "labels.yaml", "pitfalls.yaml"})
SEVERITIES = ("major", "minor")

BLIND_SHARE = 0.3
"""A file is blind when the SHA-1 of its name, read as a number, is below this share of the range."""

_HISTORY = re.compile(r"<!-- (fitted-by-history|fitted-after-fix) -->(.*?)<!-- /\1 -->", re.DOTALL)


def blind_by_rule(name: str) -> bool:
    return int(hashlib.sha1(name.encode()).hexdigest(), 16) < BLIND_SHARE * 16**40


def fitted_by_history() -> frozenset[str]:
    """Files the rule puts in the blind part that are fitted: read while the first rules were written, or
    moved after their miss named a class lint then learned (README.md's two lists)."""
    blocks = _HISTORY.findall((CORPUS / "README.md").read_text(encoding="utf-8"))
    if not blocks:
        raise ValueError("README.md has no fitted-by-history list")
    return frozenset(name for _, block in blocks for name in re.findall(r"^- `([^`]+)`", block, re.MULTILINE))


def part_of(name: str, history: frozenset[str]) -> str:
    if name.startswith("fitted-") or name in history or not blind_by_rule(name):
        return "fitted"
    return "blind"


@dataclass(frozen=True)
class Pitfall:
    id: str
    severity: str
    definition: str
    source: str
    rules: tuple[str, ...]
    """lint rule names (any area) or full ids lint.<area>.<rule> whose finding reports this pitfall."""

    def reported_by(self, rule_id: str) -> bool:
        return any(rule_id == r or rule_id.rsplit(".", 1)[-1] == r for r in self.rules)


@dataclass(frozen=True)
class Label:
    name: str
    part: str
    format: str
    pitfalls: tuple[str, ...]
    clean: tuple[str, ...]
    why: str


def files() -> list[str]:
    return sorted(p.name for p in CORPUS.iterdir() if p.is_file() and p.name not in NOT_CONFIGS)


def pitfalls() -> dict[str, Pitfall]:
    raw: dict[str, Any] = yaml.safe_load((CORPUS / "pitfalls.yaml").read_text(encoding="utf-8"))["pitfalls"]
    return {
        pid: Pitfall(pid, p["severity"], " ".join(p["definition"].split()), p["source"], tuple(p["rules"]))
        for pid, p in raw.items()
    }


def labels() -> dict[str, Label]:
    raw: dict[str, Any] = yaml.safe_load((CORPUS / "labels.yaml").read_text(encoding="utf-8"))
    return {
        name: Label(
            name,
            entry["part"],
            entry["format"],
            tuple(entry["pitfalls"]),
            tuple(entry["clean"]),
            " ".join(str(entry["why"]).split()),
        )
        for name, entry in raw.items()
    }


def sources() -> dict[str, tuple[str, str, str]]:
    """file -> (repository, path, commit), from README.md's table."""
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+?) \| `([^`]+)` \| `([0-9a-f]{40})` \|$", _readme(), re.MULTILINE)
    return {name: (repo, path, commit) for name, repo, path, commit in rows}


def _readme() -> str:
    return (CORPUS / "README.md").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Outcome:
    """What lint said of one file, judged against its label."""

    name: str
    part: str
    format: str
    unread: str | None
    """Why lint could not read the file (its one-line error), or None."""
    found: tuple[str, ...]
    missed: tuple[str, ...]
    false_errors: tuple[str, ...]
    """'rule_id@line (on a clean point: pitfall)' for each error-level finding no labelled pitfall accounts for."""
    warned_clean: tuple[str, ...]
    """'rule_id@line: pitfall' for each warning-level finding on a point the label calls clean."""


def severity(r: Result) -> str:
    return str(r.observed.get("severity"))


def judge(label: Label, vocab: Mapping[str, Pitfall], results: Sequence[Result] | None, unread: str | None) -> Outcome:
    found: list[str] = []
    missed: list[str] = []
    false_errors: list[str] = []
    warned: list[str] = []
    results = results or ()
    for pid in label.pitfalls:
        (found if any(vocab[pid].reported_by(r.id) for r in results) else missed).append(pid)
    for r in results:
        where = f"{r.id}@{r.observed.get('line')}"
        if any(vocab[pid].reported_by(r.id) for pid in label.pitfalls):
            continue
        clean = [pid for pid in label.clean if vocab[pid].reported_by(r.id)]
        if severity(r) == "error":
            false_errors.append(where + (f" (on a clean point: {', '.join(clean)})" if clean else ""))
        elif severity(r) == "warning" and clean:
            warned.append(f"{where}: {', '.join(clean)}")
    return Outcome(
        label.name, label.part, label.format, unread, tuple(found), tuple(missed), tuple(false_errors), tuple(warned)
    )


def lint_one(label: Label, vocab: Mapping[str, Pitfall]) -> Outcome:
    try:
        results = lint_file(str(CORPUS / label.name)).results
    except InputError as exc:
        return judge(label, vocab, None, str(exc).replace(str(CORPUS) + "/", ""))
    return judge(label, vocab, results, None)


@dataclass(frozen=True)
class Score:
    part: str
    files: int
    unread: int
    major: tuple[int, int]
    """(labelled major pitfalls reported, labelled major pitfalls)"""
    minor: tuple[int, int]
    false_errors: int
    warned_clean: int


def score(outcomes: Iterable[Outcome], vocab: Mapping[str, Pitfall], part: str) -> Score:
    mine = [o for o in outcomes if o.part == part]

    def tally(sev: str) -> tuple[int, int]:
        hit = sum(1 for o in mine for p in o.found if vocab[p].severity == sev)
        miss = sum(1 for o in mine for p in o.missed if vocab[p].severity == sev)
        return hit, hit + miss

    return Score(
        part,
        len(mine),
        sum(1 for o in mine if o.unread),
        tally("major"),
        tally("minor"),
        sum(len(o.false_errors) for o in mine),
        sum(len(o.warned_clean) for o in mine),
    )
