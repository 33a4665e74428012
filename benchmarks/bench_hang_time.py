"""How soon `ddp-doctor run` names a hang, learned threshold against the fixed default, and its false alarms.

    python benchmarks/bench_hang_time.py [--jobs 3] [--only hang|healthy] [--markdown]

Real torchrun + gloo jobs on CPU (tests/jobwatch/jobs/rhythm.py, 2 ranks) with step times of 0.05 s,
1 s and 10 s hang at a known step: one rank leaves the loop, or one rank calls a different collective
(all_gather where the others all-reduce). The rank that hangs writes the moment (epoch seconds) to a
marker file; the report's hang has the moment of the verdict; the difference is the time to verdict.
Each hang runs twice: under the learned threshold (the defaults) and under the fixed threshold the
doctor used before (`--hang-after 180`, the yardstick, in the same run); the ratio is printed.

Healthy jobs (0.05 s steps, so the learned threshold is its floor) with one long quiet phase count the
false alarms: a 40 s checkpoint on one rank, torch.compile of a larger model, a 40 s evaluation loop
without collectives, a first batch that takes 40 s. Each runs with the defaults and with
`--stack-sample 0` (no phase seen in sampled stacks: the examination alone must call them not hung).

Jobs run --jobs at a time (hung jobs sleep; the 0.05 s ones use a fraction of a core). Every job has a
deadline; its process group is ended if it passes it; the temporary directory is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "jobwatch" / "jobs" / "rhythm.py"
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
FIXED_DEFAULT = "180"

STEPS = {0.05: 400, 1.0: 30, 10.0: 12}
"""Step time -> the step the hang happens at (past the warm-up)."""
QUIET = {
    "40 s checkpoint on rank 0": ("--quiet", "checkpoint", "--quiet-s", "40"),
    "torch.compile of a larger model": ("--quiet", "compile"),
    "40 s evaluation loop, no collectives": ("--quiet", "eval", "--quiet-s", "40"),
    "40 s first batch": ("--quiet", "first-batch", "--quiet-s", "40"),
}


@dataclass(frozen=True)
class Case:
    name: str
    job_args: tuple[str, ...]
    doctor_args: tuple[str, ...]
    deadline_s: float


@dataclass(frozen=True)
class Outcome:
    case: Case
    hang_after_s: float | None
    """Seconds from the hang to the verdict; None: no hang named."""
    kind: str
    summary: str
    looks: int
    exit_code: int
    seconds: float


def _run(case: Case, work: Path) -> Outcome:
    d = work / f"case-{abs(hash(case.name)) % 10**8}"
    d.mkdir()
    marker = d / "hang.at"
    argv = [sys.executable, "-m", "ddp_doctor", "run", "--run-dir", str(d / "run"), "--format", "json"]
    argv += ["--output", str(d / "report.json"), "--on-hang", "kill", "--exit-code", "verdict", *case.doctor_args]
    # --standalone: each job its own rendezvous on a free port, so jobs can run side by side.
    argv += ["--", TORCHRUN, "--standalone", "--nproc-per-node", "2", "--monitor-interval", "0.2", str(JOB)]
    argv += ["--marker", str(marker), *case.job_args]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t0 = time.monotonic()
    with open(d / "stderr.txt", "wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=d, start_new_session=True)
        try:
            code = proc.wait(timeout=case.deadline_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)  # the doctor ends its job on SIGTERM
            try:
                code = proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                code = proc.wait()
    seconds = time.monotonic() - t0
    report: dict[str, Any] = json.loads((d / "report.json").read_text()) if (d / "report.json").exists() else {}
    hangs = (report.get("facts", {}).get("run", {}) or {}).get("hangs") or []
    quiet = [r for r in report.get("results", []) if r["id"] == "run.quiet"]
    looks = len(quiet[0]["observed"]["looks"]) if quiet else 0
    if hangs and marker.exists():
        after: float | None = round(hangs[0]["at_epoch"] - float(marker.read_text()), 1)
        kind = hangs[0]["kind"]
        summary = hangs[0]["message"]
    elif hangs:
        after, kind, summary = None, hangs[0]["kind"], "FALSE ALARM: " + hangs[0]["message"]
    else:
        after, kind, summary = None, "", "no hang named" if report else f"no report (exit {code})"
    return Outcome(case, after, kind, summary, looks + len(hangs), code, round(seconds, 1))


def hang_cases() -> list[Case]:
    cases = []
    for step_s, at in STEPS.items():
        for hang in ("leave", "mismatch"):
            job = ("--step-s", str(step_s), "--steps", "100000", "--hang", hang, "--hang-at", str(at))
            deadline = step_s * at + 400
            cases.append(Case(f"{step_s:g} s steps, {hang} | learned", job, (), deadline))
            cases.append(Case(f"{step_s:g} s steps, {hang} | fixed", job, ("--hang-after", FIXED_DEFAULT), deadline))
    return cases


def healthy_cases() -> list[Case]:
    cases = []
    for name, quiet in QUIET.items():
        job = ("--step-s", "0.05", "--steps", "600", "--quiet-at", "300", *quiet)
        cases.append(Case(f"{name} | learned", job, (), 600))
        cases.append(Case(f"{name} | learned, --stack-sample 0", job, ("--stack-sample", "0"), 600))
    return cases


def _cell(o: Outcome) -> str:
    if o.hang_after_s is None:
        return o.summary
    return f"{o.hang_after_s:.1f} s ({o.kind})"


def table(outcomes: list[Outcome]) -> str:
    by = {o.case.name: o for o in outcomes}
    lines = []
    hang_rows = sorted({n.split(" | ")[0] for n in by if "steps," in n}, key=lambda n: (float(n.split()[0]), n))
    if hang_rows:
        lines += [
            (
                "| job (2 gloo ranks) | learned threshold (defaults): hang to verdict | "
                f"fixed --hang-after {FIXED_DEFAULT} (the old default) | fixed / learned |"
            ),
            "|---|---|---|---|",
        ]
        for row in hang_rows:
            learned, fixed = by.get(f"{row} | learned"), by.get(f"{row} | fixed")
            ratio = (
                f"{fixed.hang_after_s / learned.hang_after_s:.1f}x"
                if learned and fixed and learned.hang_after_s and fixed.hang_after_s
                else "n/a"
            )
            lines.append(
                f"| {row} | {_cell(learned) if learned else '-'} | {_cell(fixed) if fixed else '-'} | {ratio} |"
            )
    healthy_rows = [n for n in QUIET if f"{n} | learned" in by]
    if healthy_rows:
        false_alarms = sum(1 for o in outcomes if "steps," not in o.case.name and o.kind)
        total = sum(1 for o in outcomes if "steps," not in o.case.name)
        lines += [
            "",
            f"False alarms over healthy jobs with a long quiet phase (0.05 s steps): {false_alarms} of {total}",
            "",
            "| healthy job (0.05 s steps) | defaults (phases seen in sampled stacks) | --stack-sample 0 (examination only) |",
            "|---|---|---|",
        ]
        for row in healthy_rows:
            a, b = by[f"{row} | learned"], by.get(f"{row} | learned, --stack-sample 0")
            cells = [
                f"{_cell(o)}, {o.looks} examination{'' if o.looks == 1 else 's'}, {o.seconds:.0f} s, exit {o.exit_code}"
                if o
                else "-"
                for o in (a, b)
            ]
            lines.append(f"| {row} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--jobs", type=int, default=3, help="jobs at a time (default 3)")
    ap.add_argument("--only", choices=("hang", "healthy"), help="one half of the table")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    args = ap.parse_args(argv)
    cases = ([] if args.only == "healthy" else hang_cases()) + ([] if args.only == "hang" else healthy_cases())
    cases = [c for c in cases if args.filter in c.name]
    # The longest first, so the pool ends together.
    cases.sort(key=lambda c: -c.deadline_s)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-hang-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        outcomes = list(pool.map(lambda c: _run(c, Path(tmp)), cases))
    for o in outcomes:
        print(f"# {o.case.name}: {o.summary[:160]} (exit {o.exit_code}, {o.seconds:.0f} s)", file=sys.stderr)
    print(table(outcomes))
    print(f"\n{len(cases)} jobs, {args.jobs} at a time, {time.monotonic() - started:.0f} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
