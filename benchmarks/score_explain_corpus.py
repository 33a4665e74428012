"""Score `ddp-doctor explain` on the real log corpus: the blind part first, then the fitted part.

    .venv/bin/python benchmarks/score_explain_corpus.py [--ddp-doctor PATH] [--jobs 2] [--timeout 60] [--json FILE]

Each log of tests/fixtures/logs/real is fed to the installed `ddp-doctor explain --format json -` on stdin, so
the tool sees the content only, never the file name (names can carry the answer). A log is right when the
verdict matches (a failure: some FAIL result; a healthy run: none) and, for a failure, the tool names the cause
its thread concluded: the label's root_cause id first, or one of its `cause` patterns in the answer's words
(headline + the root-cause result's summary, cause and remedy), and its first_rank when the label has one.
A label marked echo_ok (its log states the cause in the thread's words) is right by its root_cause id only. One
line counts the echo-able labels per part: a cause pattern that matches its own log (tests/diagnose/test_label_echo.py).
A log that takes longer than --timeout is wrong ("timed out").

Three outcomes, as the user sees them: FAIL; WARN (the tool says the job may have hung or a line looks wrong:
not a healthy verdict, not a diagnosis either); PASS (the tool calls the run healthy). Per part it prints the
failures called healthy (PASS: the worst answer), the failures left at WARN, the healthy runs called failures
and the healthy runs given a WARN.

The blind part (README.md: the rule) estimates what a user meets next; its misses are listed so that the class
of knowledge missing can be found. Read them for that only, never to fit one log.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fixtures.logs.real import corpus  # the repository root is on the path only now


def installed_tool() -> str:
    beside = Path(sys.executable).with_name("ddp-doctor")
    found = str(beside) if beside.exists() else shutil.which("ddp-doctor")
    if found is None:
        raise SystemExit("ddp-doctor is not installed here: pip install -e . (or pass --ddp-doctor PATH)")
    return found


def explain(tool: str, log: Path, timeout: float) -> corpus.Answer | str:
    """The tool's answer for one log, or why there is none."""
    try:
        with log.open("rb") as stdin:
            proc = subprocess.run(
                [tool, "explain", "--format", "json", "--quiet", "-"],
                stdin=stdin,
                capture_output=True,
                timeout=timeout,
                env={**os.environ, "NO_COLOR": "1"},
                check=False,
            )
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:g} s"
    if proc.returncode not in (0, 1):
        return f"exit {proc.returncode}: {proc.stderr.decode(errors='replace').strip()[-200:]}"
    try:
        return corpus.answer(json.loads(proc.stdout))
    except ValueError:
        return "no JSON report on stdout"


def expected(label: Mapping[str, Any]) -> str:
    if label["verdict"] == "healthy":
        return "healthy"
    rc = label.get("root_cause")
    return f"fail: {rc + ' or ' if rc else ''}/{'|'.join(label['cause'])}/"


def echo_line(labels: Mapping[str, Mapping[str, Any]]) -> str:
    """How many failure labels have a cause pattern that matches their own log (an echo would be judged right)."""
    counts: dict[str, list[int]] = {"blind": [0, 0, 0], "fitted": [0, 0, 0]}
    for name, label in labels.items():
        if label["verdict"] == "fail":
            c = counts[corpus.part(name, label)]
            c[0] += 1
            if corpus.echoed(name, label):
                c[1 if "echo_ok" not in label else 2] += 1
    return "echo-able labels (a cause pattern matches the log's own text): " + "; ".join(
        f"{part} {c[1]} of {c[0]} failures (+{c[2]} allowed: the log states the cause, judged by id only)"
        for part, c in counts.items()
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ddp-doctor", default=None, help="the tool to score (default: the one installed here)")
    ap.add_argument("--jobs", type=int, default=2, help="logs explained at once (default 2)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per log (default 60)")
    ap.add_argument("--json", type=Path, default=None, help="also write every log's outcome to this file")
    args = ap.parse_args(argv)
    tool = args.ddp_doctor or installed_tool()
    labels = corpus.load()
    names = sorted(labels)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        answers = dict(zip(names, pool.map(lambda n: explain(tool, corpus.HERE / n, args.timeout), names)))
    elapsed = time.monotonic() - started

    rows: list[dict[str, Any]] = []
    for name in names:
        label, got = labels[name], answers[name]
        if isinstance(got, str):
            right, why, said = False, got, got
        else:
            verdict = corpus.judge(label, got)
            right, why = verdict.right, verdict.why
            said = f"{got.root_cause}: {got.said()}" if got.failed else f"{got.verdict}: {got.said()}"
        rows.append(
            {
                "log": name,
                "part": corpus.part(name, label),
                "verdict": label["verdict"],
                "right": right,
                "why": why,
                "expected": expected(label),
                "said": said,
            }
        )

    for part in ("blind", "fitted"):
        mine = [r for r in rows if r["part"] == part]
        right = sum(r["right"] for r in mine)
        fails = [r for r in mine if r["verdict"] == "fail"]
        count = collections.Counter(r["why"] for r in mine)
        share = 100.0 * right / len(mine) if mine else 0.0
        healthy = len(mine) - len(fails)
        print(
            f"{part} part: {right}/{len(mine)} right ({share:.1f}%); "
            f"failures called healthy (PASS): {count[corpus.CALLED_HEALTHY]} of {len(fails)}; "
            f"failures left at WARN: {count[corpus.LEFT_AT_WARN]} of {len(fails)}; "
            f"healthy runs called failures: {count[corpus.CALLED_FAILURE]} of {healthy}; "
            f"healthy runs given a WARN: {count[corpus.HEALTHY_WARNED]} of {healthy}"
        )
    print(echo_line(labels))
    misses = [r for r in rows if r["part"] == "blind" and not r["right"]]
    print(f"\nblind misses ({len(misses)}):")
    for r in misses:
        print(f"  {r['log']}: {r['why']}\n    expected {r['expected']}\n    said     {r['said']}")
    repos = {corpus.repository(str(labels[n]["source"])) for n in names}
    print(f"\n{len(names)} logs from {len(repos)} repositories, scored in {elapsed:.0f} s ({tool})")
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
