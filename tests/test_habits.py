"""The habits of shared/STYLE.md hold: the counts of tests/habits.py (python -m tests.habits prints them)
stay within their bounds. Where the code is not there yet the bound is today's count, so it only goes
down; the goal is beside it."""

from __future__ import annotations

import ast

from tests import habits

COUNTS = habits.count()


def test_dict_str_any_does_not_grow() -> None:
    # Goal: 60, only at the JSON edge (report.to_dict/from_dict, the readers of rank and facts files).
    assert 0 < COUNTS.dict_str_any <= 45


def test_no_new_function_over_60_lines_without_its_reason() -> None:
    # A function that is long for a reason says so on its def line: `# long: <why>`.
    assert COUNTS.long_functions == []


def test_every_noqa_names_a_rule_ruff_checks_and_that_is_broken_there() -> None:
    assert COUNTS.unselected_noqa == []


def test_in_function_imports_of_the_package_do_not_grow() -> None:
    # Goal: none. The CLI imports only the command that runs (cli.COMMANDS), so a command imports at its top.
    assert len(COUNTS.own_imports_in_functions) <= 1, COUNTS.own_imports_in_functions


def test_other_in_function_imports_are_heavy_or_in_a_foreign_process() -> None:
    assert COUNTS.late_imports_without_reason == []


def test_no_two_modules_of_a_package_import_each_other() -> None:
    # TYPE_CHECKING imports count here: lint-imports leaves them out, and they tie two modules all the same.
    assert COUNTS.cycles_in_packages == []


def test_no_two_module_names_differ_only_by_underscores() -> None:
    assert COUNTS.alike_module_names == []


def test_a_long_function_is_found_unless_it_says_why() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(70))
    assert habits._long_functions(ast.parse(f"def f():\n{body}"), [], "m.py") == ["m.py:1 f (71 lines)"]
    source = f"def f():  # long: a table written out\n{body}"
    assert habits._long_functions(ast.parse(source), source.splitlines(), "m.py") == []


def test_the_slow_list_adds_up_each_tests_phases() -> None:
    from tests import tiers

    out = "0.60s setup tests/a.py::t\n0.50s call     tests/a.py::t\n0.90s call tests/b.py::u\n1.20s call tests/c.py::v[x y]\n"
    assert tiers.slow_ids(out, threshold_s=1.0) == {"tests/a.py::t", "tests/c.py::v[x y]"}
