"""Counts read right with 0, 1 and 2: every message template is walked.

- lint's templates (rules.yaml: message, why and fix of every rule, every launcher's and area's
  variant) are filled with 0, 1 and 2 for every placeholder; none reads '1 nodes' or '2 node;'.
- every f-string of the package is read as a template: a number put straight before a counted noun
  ('{n} ranks') reads wrong for some n, so it goes through words.plural / words.count (or the value
  is not a count, or cannot be below 2: each listed below with why).
- nothing says 'rank(s)'.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ddp_doctor import words
from ddp_doctor.deploy.lint import engine
from ddp_doctor.deploy.lint.rules import catalogue

PACKAGE = Path(words.__file__).parent
NOUNS = [
    *("rank", "GPU", "node", "task", "worker", "process", "pod", "replica", "container", "file", "line", "entry"),
    *("sample", "step", "check", "setting", "device", "layer", "pair", "batch", "channel", "failure", "warning"),
    *("error", "finding", "shard", "collective", "signature", "interpreter", "core"),
]
PLURALS = {
    n: words.plural(2, n, "entries" if n == "entry" else "processes" if n == "process" else None)[2:] for n in NOUNS
}
ONE_MANY = re.compile(r"(?<![\w.-])1 (" + "|".join(PLURALS.values()) + r")\b")
NOT_ONE_SINGULAR = re.compile(r"(?<![\w.-])[02] (" + "|".join(NOUNS) + r")(?=[;,.):]|$| per\b| on\b| idle\b| in\b)")

# f-string values before a counted noun that are not counts ('{backend} rank' is 'gloo rank'), or
# that cannot be below 2 where they are said.
NOT_A_COUNT = {"dtype", "f.kind", "version", "value", "backend", "w.label", "label", "name[:200]", "link[:200]"}
NOT_A_COUNT |= {
    "rec['backend']",
    "what",
}  # what: a record's description in a reader's error ("rank-0.json"), not a number
AT_LEAST_TWO = {
    ("checks/docs.py", "r.gpus_when_unknown"): "a node's GPU count when unknown, 8 (checks/knowledge.yaml)",
    ("checks/table.py", "self.gpus_when_unknown"): "the same 8",
    ("deploy/lint/loader.py", "ALIAS_BUDGET"): "a constant in the thousands",
    ("diagnose/hang.py", "tail_lines"): "the tail kept, a constant in the hundreds",
    ("live/phases/sampler.py", "n"): "the test dataset's length, 1003",
}


def _templates(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _templates(v)
    elif value:
        yield str(value)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_every_lint_template_reads_right_with_0_1_and_2(n: int) -> None:
    wrong = []
    walked = 0
    for rule_id, rule in catalogue().items():
        for key in ("message", "why", "fix"):
            for template in _templates(getattr(rule, key)):
                ctx = {m.group(1): n for m in engine._FIELD.finditer(template)}
                text = engine._FIELD.sub(lambda m, ctx=ctx: engine._fill(m, ctx), template)  # type: ignore[misc]
                walked += 1
                for bad in (ONE_MANY, NOT_ONE_SINGULAR):
                    wrong += [f"{rule_id}.{key}: {m.group(0)!r} in {text!r}" for m in bad.finditer(text)]
    assert walked > 100 and wrong == []


def _counted_values() -> Iterator[tuple[str, int, str, str]]:
    """(file, line, the value's expression, the noun after it) for each f-string '{value} noun'."""
    noun = re.compile(r"^ (\w+)\b")
    forms = set(NOUNS) | set(PLURALS.values())
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.JoinedStr):
                continue
            for value, after in zip(node.values, node.values[1:]):
                if not (isinstance(value, ast.FormattedValue) and isinstance(after, ast.Constant)):
                    continue
                m = noun.match(str(after.value))
                spec = ast.unparse(value.format_spec) if value.format_spec else ""
                if m and m.group(1) in forms and not re.search(r"\.\d+[f%]", spec):  # '2.5 s', a measurement
                    rel = str(path.relative_to(PACKAGE))
                    yield rel, node.lineno, ast.unparse(value.value), m.group(1)


def test_no_count_is_put_straight_before_its_noun() -> None:
    found = list(_counted_values())
    assert len(found) > 10  # the walk sees the package's f-strings
    wrong = [
        f"{rel}:{line}: {{{expr}}} {noun}"
        for rel, line, expr, noun in found
        if expr not in NOT_A_COUNT
        and (rel, expr) not in AT_LEAST_TWO
        and not expr.startswith(("plural(", "words.plural(", "count(", "words.count("))
    ]
    assert wrong == [], "use words.plural / words.count:\n" + "\n".join(wrong)


def test_the_allowances_are_still_there() -> None:
    """An allowance whose f-string is gone is removed from the list, so the list stays honest."""
    seen = {(rel, expr) for rel, _, expr, _ in _counted_values()}
    assert [k for k in AT_LEAST_TWO if k not in seen] == []


def test_plural_and_count_with_0_1_and_2() -> None:
    assert [words.plural(n, "rank") for n in (0, 1, 2)] == ["0 ranks", "1 rank", "2 ranks"]
    assert [words.plural(n, "entry", "entries") for n in (0, 1, 2)] == ["0 entries", "1 entry", "2 entries"]
    assert [words.count(v, "node") for v in (0, "1", 2, "$NODES")] == ["0 nodes", "1 node", "2 nodes", "$NODES nodes"]
    assert [words.all_of(n, "rank") for n in (1, 2, 3)] == ["the only rank", "both ranks", "all 3 ranks"]


QUOTES = ("examples", "patterns", "pattern", "sources")
"""Knowledge-file keys that hold other programs' words (log lines PyTorch prints), not ours."""


def _yaml_strings(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        for key, v in value.items():
            if key not in QUOTES:
                yield from _yaml_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _yaml_strings(v)
    elif isinstance(value, str):
        yield value


def _strings(path: Path) -> Iterator[str]:
    if path.suffix == ".yaml":
        yield from _yaml_strings(yaml.safe_load(path.read_text(encoding="utf-8")))
        return
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def test_nothing_says_s_in_parentheses() -> None:
    said = [
        f"{path.relative_to(PACKAGE)}: {m.group(0)}"
        for path in sorted(PACKAGE.rglob("*"))
        if path.suffix in (".py", ".yaml")
        for text in _strings(path)
        for m in re.finditer(r"\b[A-Za-z]+\(s\)", text)
    ]
    assert said == []
