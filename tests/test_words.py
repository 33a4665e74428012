"""Counts read as words: '1 rank', '2 ranks', never '1 rank(s)'."""

from __future__ import annotations

import textwrap
from pathlib import Path

from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.words import count, plural, ranks


def test_plural_count_and_rank_lists() -> None:
    assert (plural(1, "GPU"), plural(0, "GPU"), plural(2, "entry", "entries")) == ("1 GPU", "0 GPUs", "2 entries")
    assert (count("1", "node"), count(8, "node"), count("all", "GPU"), count("$N", "GPU")) == (
        "1 node",
        "8 nodes",
        "all GPUs",
        "$N GPUs",
    )
    assert (ranks([3]), ranks([0, 2]), ranks(range(6))) == ("rank 3", "ranks 0 and 2", "ranks 0, 1, 2, 3, 4 and 5")


def test_lint_counts_in_words(tmp_path: Path) -> None:
    """rules.yaml writes '{nproc:rank}': one rank on one GPU is '1 rank' and '1 GPU'."""
    path = tmp_path / "job.sbatch"
    path.write_text(
        textwrap.dedent(
            """\
            #!/bin/bash
            #SBATCH --nodes=1
            #SBATCH --gres=gpu:2
            srun torchrun --nproc_per_node=1 train.py
            """
        )
    )
    found = {r.id.split(".")[-1]: r for r in lint_file(str(path)).results}
    below = found["nproc_below_gpus"]
    assert "starts 1 rank per node but is granted 2 GPUs" in below.summary, below.summary
    assert "leaving 1 GPU idle" in below.summary and "(s)" not in below.summary + (below.remedy or "")


# diagnose/catalogue.yaml is not read here: its patterns quote real logs verbatim ("DataLoader worker (pid(s) 5678)").
NOT_YET: set[str] = set()
SRC = Path(__file__).resolve().parent.parent / "src" / "ddp_doctor"


def test_no_text_says_s_in_brackets() -> None:
    import ast
    import re

    said = re.compile(r"[A-Za-z]\(s\)")
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).parts[0] in NOT_YET:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and said.search(node.value):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}: {node.value[:80]!r}")
    for name in ("deploy/lint/rules.yaml", "checks/knowledge.yaml"):
        found += [f"{name}:{i}" for i, line in enumerate((SRC / name).read_text().splitlines(), 1) if said.search(line)]
    assert not found, found
