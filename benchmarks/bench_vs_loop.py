#!/usr/bin/env python3
"""`ddp-doctor bench`'s timing of all_reduce against a minimal loop of synchronous calls, in ONE job.

Both methods run inside the same torchrun job (2 CPU ranks, gloo, fp32, in place), interleaved
round by round at each size, so load from elsewhere on the machine hits both alike (separate
jobs minutes apart differ by 30-50% on this shared 2-core machine from load alone). Method A is
the bench's own code (`ddp_doctor.bench.sweep.time_point`: warm-up, barrier, `iters` calls, the
per-rank time averaged over ranks); method B is the loop a user writes: the same tensor,
`dist.all_reduce(x)` `iters` times between two perf_counter reads on rank 0, after the same
warm-up. Prints the median over rounds of the per-round ratio A/B per size; target: within 5%.

    .venv/bin/python benchmarks/bench_sweep_vs_loop.py [--rounds 9] [--iters 20]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = [1 << 20, 16 << 20, 64 << 20]
TARGET = 0.05

JOB = r"""
import json, sys, time
import torch
import torch.distributed as dist
from ddp_doctor.bench import formulas, sweep

rounds, iters, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sizes = json.loads(sys.argv[4])
dist.init_process_group("gloo")
ctx = sweep.Ctx(rank=dist.get_rank(), world=dist.get_world_size(), device=torch.device("cpu"))
out = {n: {"bench": [], "loop": []} for n in sizes}

def loop(x):
    for _ in range(warmup):
        dist.all_reduce(x)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    return (time.perf_counter() - start) / iters

for r in range(rounds):
    for n in sizes:
        lay = formulas.layout("all_reduce", n, 4, ctx.world)
        bufs = sweep._buffers("all_reduce", lay, "fp32", True, ctx)
        order = ("bench", "loop") if r % 2 == 0 else ("loop", "bench")
        for method in order:
            if method == "bench":
                s = sweep.time_point(bufs, ctx, iters, warmup)
            else:
                s = loop(bufs.recv)
            out[n][method].append(n / 1e9 / s)
if dist.get_rank() == 0:
    print("RESULT " + json.dumps(out))
dist.destroy_process_group()
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup-iters", type=int, default=5)
    args = parser.parse_args()
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "src")}
    with tempfile.TemporaryDirectory(prefix="bench-vs-loop-") as tmp:
        script = Path(tmp, "job.py")
        script.write_text(JOB)
        argv = [
            torchrun,
            "--standalone",
            "--nproc-per-node",
            "2",
            str(script),
            str(args.rounds),
            str(args.iters),
            str(args.warmup_iters),
            json.dumps(SIZES),
        ]
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=1200, env=env, check=False, start_new_session=True
        )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"the job failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data = json.loads(line[7:])
    print(
        f"{'size':>8}  {'bench algbw (median)':>20}  {'loop algbw (median)':>19}  {'median ratio':>12}  {'min..max ratio':>15}"
    )
    worst = 0.0
    for size in SIZES:
        b, lp = data[str(size)]["bench"], data[str(size)]["loop"]
        ratios = sorted(x / y for x, y in zip(b, lp))
        med = ratios[len(ratios) // 2]
        worst = max(worst, abs(1 - med))
        print(
            f"{size >> 20:>5} MiB  {sorted(b)[len(b) // 2]:>15.3f} GB/s  {sorted(lp)[len(lp) // 2]:>14.3f} GB/s  "
            f"{med:>12.3f}  {ratios[0]:>6.3f}..{ratios[-1]:.3f}"
        )
    met = worst <= TARGET
    print(
        f"largest deviation of the median ratio {worst:.1%}; target within {TARGET:.0%}: {'met' if met else 'NOT met'} "
        f"({args.rounds} rounds x {args.iters} iters; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})"
    )
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
