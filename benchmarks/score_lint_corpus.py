"""Score `ddp-doctor lint` on the real config corpus: the blind part first, then the fitted part.

    .venv/bin/python benchmarks/score_lint_corpus.py [--inventory] [--fitted-details] [--json FILE]

Every file of tests/fixtures/lint-corpus is linted as `ddp-doctor lint FILE` lints it. Its labels name pitfalls
(pitfalls.yaml): a pitfall is reported when lint gives, at any severity, a finding of one of the rules the
vocabulary maps to it. Per part it prints the recall on major and on minor pitfalls, the false errors (an
error-level finding no labelled pitfall of the file accounts for; those on a point the label calls clean are
marked), the warnings on clean points, and the files lint could not read (exit 2), then the blind misses, false
errors and unread files by name. Read a blind miss only to learn which class of knowledge is missing (a kind of
object, a launcher, a format), never to fit that one file.

The blind part (README.md: the rule) estimates what a user meets next. Targets (issue 25): blind major recall
>= 90%, 0 false errors, every file read.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.deploy import lint_corpus as corpus  # the repository root is on the path only now


def percent(hit: int, total: int) -> str:
    return f"{hit} of {total}" + (f" ({100 * hit / total:.0f}%)" if total else "")


def line(s: corpus.Score) -> str:
    return (
        f"{s.part:>6}: {s.files} files | major pitfalls reported {percent(*s.major)} | minor {percent(*s.minor)} | "
        f"false errors {s.false_errors} | warnings on clean points {s.warned_clean} | unread {s.unread}"
    )


def details(outcomes: list[corpus.Outcome], part: str) -> list[str]:
    out: list[str] = []
    mine = [o for o in outcomes if o.part == part]
    for o in mine:
        if o.unread:
            out.append(f"  unread       {o.name}: {o.unread}")
    for o in mine:
        for p in o.missed:
            out.append(f"  missed       {o.name}: {p}")
    for o in mine:
        for f in o.false_errors:
            out.append(f"  false error  {o.name}: {f}")
    return out


def inventory(labels: dict[str, corpus.Label]) -> list[str]:
    repos = Counter(src[0] for name, src in corpus.sources().items() if name in labels)
    formats = Counter(label.format for label in labels.values())
    out = [f"formats ({len(formats)}):"]
    out += [f"  {n:4d}  {f}" for f, n in sorted(formats.items(), key=lambda kv: (-kv[1], kv[0]))]
    out.append(f"repositories ({len(repos)}):")
    out += [f"  {n:4d}  {r}" for r, n in sorted(repos.items(), key=lambda kv: (-kv[1], kv[0]))]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--inventory", action="store_true", help="also print the files per format and per repository")
    ap.add_argument("--fitted-details", action="store_true", help="also list the fitted part's misses")
    ap.add_argument("--json", type=Path, default=None, help="also write every file's outcome to this file")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the output quietly
    vocab = corpus.pitfalls()
    labels = corpus.labels()
    outcomes = [corpus.lint_one(labels[name], vocab) for name in corpus.files()]
    blind, fitted = (corpus.score(outcomes, vocab, part) for part in ("blind", "fitted"))
    formats = len({label.format for label in labels.values()})
    print(f"lint corpus: {len(outcomes)} files over {formats} formats ({blind.files} blind, {fitted.files} fitted)")
    print(line(blind))
    print(line(fitted))
    for part in ("blind", "fitted") if args.fitted_details else ("blind",):
        found = details(outcomes, part)
        print(f"{part} misses, false errors and unread files:" if found else f"{part}: nothing missed")
        for entry in found:
            print(entry)
    if args.inventory:
        print("\n".join(inventory(labels)))
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
