"""Counts of the habits in shared/STYLE.md, read from the package's source (python -m tests.habits).

Each count is a number a reviewer would otherwise estimate by grep; tests/test_habits.py holds them
to their bounds, so a habit that slips fails a test instead of waiting for the next audit.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "ddp_doctor"
LONG_LINES = 60
# A function over LONG_LINES lines says why on its `def` line or the line above: `# long: <why>`.
LONG_REASON = re.compile(r"#\s*long:\s*\S")
# Third-party modules imported only where they are used, each with why. Anything else imported inside a
# function (the package's own modules, the standard library) is counted.
HEAVY = {
    "torch": "about 2 s and 300 MB on import; the parent side never imports it",
    "numpy": "imported by the rank that needs it; the parent side never imports it",
    "rich": "a quarter second on import; only a terminal needs it",
    "matplotlib": "a second on import; only --plot needs it",
    "yaml": "read once per knowledge file",
    "pynvml": "optional: absent where no NVIDIA driver is",
    "hyperscan": "optional engine, with a fallback",
    "re2": "optional engine, with a fallback",
    "zstandard": "optional: only a .zst input needs it",
    "isal": "optional: a faster gzip where installed",
    "tree_sitter": "optional shell parser, with bash -n as the fallback",
    "tree_sitter_bash": "optional shell parser, with bash -n as the fallback",
    "tomli": "Python 3.10 has no tomllib",
    "tomllib": "tried first, tomli where Python 3.10 has no tomllib",
}
# Modules that run inside someone else's process (the user's job, a probe child): every import there costs
# that process, so they import late on purpose.
IN_FOREIGN_PROCESS = ("jobwatch/hook/", "env/probes/torch_child.py", "env/probes/interp_child.py")
SCANNED = ("src", "tests", "benchmarks")


@dataclass(frozen=True)
class Counts:
    dict_str_any: int
    """`dict[str, Any]` written in the package."""
    long_functions: list[str]
    """Functions over LONG_LINES lines with no `# long:` reason beside them."""
    unselected_noqa: list[str]
    """`noqa` markers (in src/, tests/, benchmarks/) naming a rule that ruff, as CI runs it, does not check."""
    own_imports_in_functions: list[str]
    """Imports of ddp_doctor's own modules inside a function body."""
    late_imports_without_reason: list[str]
    """In-function imports of other modules than the HEAVY ones, outside IN_FOREIGN_PROCESS."""
    cycles_in_packages: list[str]
    """Module pairs of one package that import each other (at import time or in functions)."""
    alike_module_names: list[str]
    """Modules of one package whose names differ only by underscores ('distvars' and 'dist_vars')."""


def _files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".")[: -node.level] if not module.endswith("__init__") else module.split(".")
        base = ".".join([*package, *([base] if base else [])])
    return [base] + [f"{base}.{a.name}" for a in node.names]


def _function_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += [n for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return found


def count() -> Counts:
    modules = {_module(p): p for p in _files()}
    edges: dict[str, set[str]] = defaultdict(set)
    long_fns: list[str] = []
    own_in_fn: list[str] = []
    late: list[str] = []
    for module, path in modules.items():
        text = path.read_text(encoding="utf-8")
        rel = str(path.relative_to(SRC))
        tree = ast.parse(text)
        long_fns += _long_functions(tree, text.splitlines(), rel)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges[module] |= {t for n in _imported(node, module) if (t := _owning_module(n, modules)) != module}
        for node in _function_imports(tree):
            name = _imported(node, module)[0]
            where = f"{rel}:{node.lineno} {name}"
            if name.split(".")[0] == "ddp_doctor":
                own_in_fn.append(where)
            elif name.split(".")[0] not in HEAVY and not rel.startswith(IN_FOREIGN_PROCESS):
                late.append(where)
    edges = {m: {t for t in ts if t} for m, ts in edges.items()}
    return Counts(
        dict_str_any=sum(p.read_text(encoding="utf-8").count("dict[str, Any]") for p in modules.values()),
        long_functions=long_fns,
        unselected_noqa=_unselected_noqa(),
        own_imports_in_functions=own_in_fn,
        late_imports_without_reason=late,
        cycles_in_packages=_cycles(edges),
        alike_module_names=_alike(modules),
    )


def _long_functions(tree: ast.AST, lines: list[str], rel: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = node.end_lineno - start + 1
            beside = " ".join(lines[max(0, start - 2) : node.body[0].lineno - 1])
            if length > LONG_LINES and not LONG_REASON.search(beside):
                found.append(f"{rel}:{node.lineno} {node.name} ({length} lines)")
    return found


def _unselected_noqa() -> list[str]:
    """Ruff's own answer (RUF100, selected in pyproject.toml): a marker for a rule ruff does not check
    as configured, or one not broken on that line."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("ruff")), "check", "--output-format=json", "--exit-zero", *SCANNED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [
        f"{Path(d['filename']).relative_to(ROOT)}:{d['location']['row']} {d['message']}"
        for d in json.loads(done.stdout)
        if d["code"] == "RUF100"
    ]


def _owning_module(name: str, modules: dict[str, Path]) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _cycles(edges: dict[str, set[str]]) -> list[str]:
    """Pairs of sibling modules (same parent package) that reach each other through the package's own imports."""
    found: list[str] = []
    for a in sorted(edges):
        for b in sorted(edges[a]):
            if a < b and a.rpartition(".")[0] == b.rpartition(".")[0] and _reaches(edges, b, a):
                found.append(f"{a} <-> {b}")
    return found


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    package = start.rpartition(".")[0] + "."
    seen, todo = {start}, [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt.startswith(package) and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def _alike(modules: dict[str, Path]) -> list[str]:
    by_key: dict[tuple[str, str], list[str]] = defaultdict(list)
    for module in modules:
        package, _, name = module.rpartition(".")
        by_key[(package, name.replace("_", ""))].append(module)
    return sorted(" ~ ".join(sorted(names)) for names in by_key.values() if len(names) > 1)


def main() -> int:
    counts = count()
    print(f"dict[str, Any] written: {counts.dict_str_any}")
    for field in (
        "long_functions",
        "unselected_noqa",
        "own_imports_in_functions",
        "late_imports_without_reason",
        "cycles_in_packages",
        "alike_module_names",
    ):
        items: list[str] = getattr(counts, field)
        print(f"{field.replace('_', ' ')}: {len(items)}")
        for item in items:
            print(f"  {item}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
