#!/usr/bin/env python3
"""`ddp-doctor bench`'s all_reduce figures against a minimal loop of plain synchronous calls.

CPU, 2 ranks, gloo, fp32, in place, the same sizes, iterations and warm-up for both. Three comparisons:

same-job       Both methods inside ONE torchrun job, interleaved round by round at each size (order
               alternating), on the same tensor: bench's own timing code (`ddp_doctor.bench.sweep.
               time_point`: fill, warm-up, barrier, `iters` calls, per-rank time averaged over ranks)
               against `dist.all_reduce(x)` `iters` times between two perf_counter reads. The loop's
               time is kept both for rank 0 alone (what a user's loop prints) and averaged over ranks
               (bench's convention, nccl-tests' `-a 1`). Isolates the timing code.
separate-jobs  The issue's comparison: the real `python -m ddp_doctor bench` command (CLI, launcher,
               bench worker) against a torchrun job running the minimal loop, alternating A B / B A,
               one job each per round. Also prints each method's spread over its own jobs (best job
               over worst job): how far two runs of the SAME method differ from job to job.
pinned         separate-jobs again with both methods under `taskset -c --cpus`, so every job's ranks
               run on the same cores (tests whether job-to-job differences come from where the
               scheduler placed the ranks).
first-size     (with --parts first-size) the loop at the smallest size measured 8 times back to back
               right after init, 3 jobs: whether the fixed warm-up is enough for a sweep's first size
               (both methods start cold there, so this does not enter the ratios).

Prints, per size and comparison, the median over rounds of the per-round ratio bench/loop (algbw);
target: within 5%. Exit 0 when every median ratio is within 5%, else 1.

    .venv/bin/python benchmarks/bench_vs_loop.py [--rounds 7] [--parts same-job,separate-jobs] [--cpus 2-5]
        [--json raw.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.05
DEFAULT_SIZES = "1M,16M,64M"

SAME_JOB = r"""
import json, sys, time
import torch
import torch.distributed as dist
from ddp_doctor.bench import formulas, sweep

rounds, iters, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sizes = json.loads(sys.argv[4])
dist.init_process_group("gloo")
ctx = sweep.Ctx(rank=dist.get_rank(), world=dist.get_world_size(), device=torch.device("cpu"))
mine = {n: {"bench": [], "loop_own": []} for n in sizes}

def loop(x):
    for _ in range(warmup):
        dist.all_reduce(x)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    return (time.perf_counter() - start) / iters

sweep.warm_up("all_reduce", "fp32", sizes, True, warmup, ctx)  # as bench does before its sweep
for r in range(rounds):
    for n in sizes:
        lay = formulas.layout("all_reduce", n, 4, ctx.world)
        bufs = sweep._buffers("all_reduce", lay, "fp32", True, ctx)
        bufs.fill()  # the loop may go first: never time garbage (uninitialised) memory
        order = ("bench", "loop") if r % 2 == 0 else ("loop", "bench")
        for method in order:
            if method == "bench":
                mine[n]["bench"].append(sweep.time_point(bufs, ctx, iters, warmup))
            else:
                mine[n]["loop_own"].append(loop(bufs.recv))
        del bufs
every = [None] * ctx.world
dist.all_gather_object(every, mine)
if ctx.rank == 0:
    out = {"threads": torch.get_num_threads()}
    for n in sizes:
        own = [e[n]["loop_own"] for e in every]
        out[str(n)] = {
            "bench": [n / 1e9 / s for s in mine[n]["bench"]],
            "loop": [n / 1e9 / s for s in own[0]],
            "loop_avg": [n / 1e9 / (sum(col) / len(col)) for col in zip(*own)],
        }
    print("RESULT " + json.dumps(out))
dist.destroy_process_group()
"""

# What a user writes: a fresh tensor per size, warm-up, barrier, rank 0's clock around the calls;
# before the sweep, the warm-up at the largest and the smallest size that bench (and nccl-tests) do.
LOOP_JOB = r"""
import json, sys, time
import torch
import torch.distributed as dist

sizes, iters, warmup = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo")
out = {"threads": torch.get_num_threads()}
for nbytes in dict.fromkeys((max(sizes), min(sizes))):
    x = torch.ones(nbytes // 4)
    for _ in range(warmup):
        dist.all_reduce(x)
for nbytes in sizes:
    x = torch.ones(nbytes // 4)
    for _ in range(warmup):
        dist.all_reduce(x)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    out[str(nbytes)] = nbytes / 1e9 / ((time.perf_counter() - start) / iters)
if dist.get_rank() == 0:
    print("RESULT " + json.dumps(out))
dist.destroy_process_group()
"""


# The loop at one size, measured several times back to back right after init, with no warm-up
# before the sweep: is a fixed warm-up of --warmup-iters calls at a size enough for the FIRST size
# of a sweep? (Why bench also warms up at the largest and smallest size first, as nccl-tests does.)
REPEAT_JOB = r"""
import json, sys, time
import torch
import torch.distributed as dist

nbytes, iters, warmup, repeats = (int(a) for a in sys.argv[1:5])
dist.init_process_group("gloo")
x = torch.ones(nbytes // 4)
out = []
for _ in range(repeats):
    for _ in range(warmup):
        dist.all_reduce(x)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    out.append(nbytes / 1e9 / ((time.perf_counter() - start) / iters))
if dist.get_rank() == 0:
    print("RESULT " + json.dumps({"algbw": out}))
dist.destroy_process_group()
"""


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def torchrun() -> list[str]:
    # torchrun of this interpreter (`ddp-doctor bench --python` gets the same one), whether or not a
    # torchrun script is on PATH.
    return [sys.executable, "-m", "torch.distributed.run"]


def env() -> dict[str, str]:
    parts = [str(ROOT / "src"), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(parts)}


def run_job(argv: list[str], timeout: float) -> dict[str, Any]:
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=env(), check=False, start_new_session=True
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"{argv[:3]}... failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return dict(json.loads(line[7:]))


def same_job(tmp: str, sizes: list[int], rounds: int, iters: int, warmup: int) -> dict[str, Any]:
    script = Path(tmp, "same_job.py")
    script.write_text(SAME_JOB)
    argv = [*torchrun(), "--standalone", "--nproc-per-node", "2", str(script)]
    return run_job([*argv, str(rounds), str(iters), str(warmup), json.dumps(sizes)], timeout=1200)


def doctor_job(sizes: list[int], iters: int, warmup: int, prefix: list[str]) -> dict[str, Any]:
    argv = [*prefix, sys.executable, "-m", "ddp_doctor", "bench", "--python", sys.executable]
    argv += ["--backend", "gloo", "--nproc", "2", "--ops", "all_reduce", "--no-check", "--format", "json"]
    argv += ["--min-bytes", str(min(sizes)), "--max-bytes", str(max(sizes))]
    argv += ["--iters", str(iters), "--warmup-iters", str(warmup), "--timeout", "600"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=env(), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"ddp-doctor bench failed ({proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    (result,) = [r for r in report["results"] if r["id"] == "bench.all_reduce"]
    got = {int(p["bytes"]): float(p["algbw_gbps"]) for p in result["observed"]["points"]}
    return {str(n): got[n] for n in sizes}


def loop_job(tmp: str, sizes: list[int], iters: int, warmup: int, prefix: list[str]) -> dict[str, Any]:
    script = Path(tmp, "loop_job.py")
    script.write_text(LOOP_JOB)
    # The same factor-2 sweep as bench's, so both go through the sizes in the same order.
    sweep = [n for n in _doubling(min(sizes), max(sizes))]
    argv = [*prefix, *torchrun(), "--standalone", "--nproc-per-node", "2", str(script)]
    got = run_job([*argv, json.dumps(sweep), str(iters), str(warmup)], timeout=900)
    return {str(n): got[str(n)] for n in sizes} | {"threads": got["threads"]}


def _doubling(lo: int, hi: int) -> list[int]:
    out = []
    while lo <= hi:
        out.append(lo)
        lo *= 2
    return out


def separate_jobs(tmp: str, sizes: list[int], rounds: int, iters: int, warmup: int, cpus: str | None) -> dict[str, Any]:
    prefix = ["taskset", "-c", cpus] if cpus else []
    out: dict[str, Any] = {str(n): {"bench": [], "loop": []} for n in sizes}
    for r in range(rounds):
        # A B, then B A: whatever the order costs (the previous job's teardown) hits both.
        for method in ("bench", "loop") if r % 2 == 0 else ("loop", "bench"):
            got = (
                doctor_job(sizes, iters, warmup, prefix)
                if method == "bench"
                else loop_job(tmp, sizes, iters, warmup, prefix)
            )
            out["threads"] = got.pop("threads", out.get("threads"))
            for n in sizes:
                out[str(n)][method].append(got[str(n)])
    return out


def first_size(tmp: str, nbytes: int, iters: int, warmup: int, rounds: int) -> dict[str, Any]:
    script = Path(tmp, "repeat_job.py")
    script.write_text(REPEAT_JOB)
    argv = [*torchrun(), "--standalone", "--nproc-per-node", "2", str(script)]
    runs = [run_job([*argv, str(nbytes), str(iters), str(warmup), "8"], timeout=600)["algbw"] for _ in range(rounds)]
    return {"bytes": nbytes, "runs": runs}


def summarize_first(data: dict[str, Any]) -> None:
    print(f"\n== first size of a sweep: the loop at {data['bytes'] >> 20} MiB, 8 measurements back to back after init")
    for run in data["runs"]:
        later = statistics.median(run[1:])
        print("  " + " ".join(f"{x:.3f}" for x in run) + f"  GB/s; first / median of the rest {run[0] / later:.3f}")


def summarize(name: str, data: dict[str, Any], sizes: list[int], extra: str | None = None) -> float:
    """Prints one table; returns the largest deviation of a median ratio from 1."""
    print(f"\n== {name}")
    cols = ["size", "bench algbw", "loop algbw", "ratio (median)", "min..max", "spread bench", "spread loop"]
    if extra:
        cols.append(f"ratio vs {extra}")
    print("  ".join(f"{c:>14}" for c in cols))
    worst = 0.0
    for n in sizes:
        b, lp = data[str(n)]["bench"], data[str(n)]["loop"]
        ratios = [x / y for x, y in zip(b, lp)]
        med = statistics.median(ratios)
        worst = max(worst, abs(1 - med))
        row = [
            f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} B",
            f"{statistics.median(b):.3f} GB/s",
            f"{statistics.median(lp):.3f} GB/s",
            f"{med:.3f}",
            f"{min(ratios):.2f}..{max(ratios):.2f}",
            f"{max(b) / min(b):.2f}x",
            f"{max(lp) / min(lp):.2f}x",
        ]
        if extra:
            row.append(f"{statistics.median(x / y for x, y in zip(b, data[str(n)][extra])):.3f}")
        print("  ".join(f"{c:>14}" for c in row))
    print(
        f"largest deviation of a median ratio: {worst:.1%} (target {TARGET:.0%}: {'met' if worst <= TARGET else 'NOT met'})"
    )
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup-iters", type=int, default=5)
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help=f"comma-separated (default: {DEFAULT_SIZES})")
    parser.add_argument(
        "--parts", default="same-job,separate-jobs", help="same-job, separate-jobs, first-size (default: the first two)"
    )
    parser.add_argument("--cpus", help="also run separate-jobs with both methods under `taskset -c CPUS`")
    parser.add_argument("--json", help="write every measured figure here")
    args = parser.parse_args()
    sizes = sorted(parse_size(s) for s in args.sizes.split(","))
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if args.cpus and shutil.which("taskset"):
        parts.append("pinned")
    elif args.cpus:
        print("(no taskset on this machine: the pinned comparison is left out)")
    raw: dict[str, Any] = {
        "args": vars(args),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "python": sys.executable,
    }
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds x {args.iters} iters")
    worst = 0.0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-vs-loop-") as tmp:
        for part in parts:
            if part == "same-job":
                raw[part] = same_job(tmp, sizes, args.rounds, args.iters, args.warmup_iters)
                title = "same job: bench's time_point vs the loop on the same tensor (loop = rank 0's clock)"
                worst = max(worst, summarize(title, raw[part], sizes, extra="loop_avg"))
            elif part in ("separate-jobs", "pinned"):
                cpus = args.cpus if part == "pinned" else None
                raw[part] = separate_jobs(tmp, sizes, args.rounds, args.iters, args.warmup_iters, cpus)
                where = f" (taskset -c {cpus})" if cpus else ""
                title = f"separate jobs{where}: `ddp-doctor bench` vs a torchrun job of the minimal loop, one each per round"
                worst = max(worst, summarize(title, raw[part], sizes))
            elif part == "first-size":
                raw[part] = first_size(tmp, min(sizes), args.iters, args.warmup_iters, min(args.rounds, 3))
                summarize_first(raw[part])
            else:
                parser.error(f"unknown part {part!r}")
            if "threads" in raw[part]:
                print(f"(ranks' torch threads: {raw[part]['threads']})")
            if args.json:  # after every part: a run cut short by a deadline keeps what it measured
                Path(args.json).write_text(json.dumps(raw, indent=1))
    raw["loadavg_end"] = os.getloadavg()
    raw["duration_s"] = round(time.monotonic() - started, 1)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}; {raw['duration_s']} s")
    if args.json:
        Path(args.json).write_text(json.dumps(raw, indent=1))
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
