#!/usr/bin/env python3
"""`ddp-doctor bench` all_reduce algbw against a minimal hand-written torch.distributed loop.

Both run on this machine in the same script, 2 CPU ranks over gloo, 1 MiB to 64 MiB, fp32,
in place. They alternate (A B A B ...) and each keeps its best run per size, so a burst of
load from elsewhere on the machine hits both alike. Prints the ratio per size; the target is
ddp-doctor within 5% of the hand-written loop at every size (exit 0 when met, 1 when not).

    .venv/bin/python benchmarks/bench_vs_handwritten.py [--rounds 2] [--iters 20]
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
MIN_BYTES, MAX_BYTES = 1 << 20, 64 << 20
TARGET = 0.05

HANDWRITTEN = r'''
import json, sys, time
import torch
import torch.distributed as dist

sizes, iters, warmup = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
dist.init_process_group("gloo")
out = {}
for nbytes in sizes:
    x = torch.ones(nbytes // 4)
    for _ in range(warmup):
        dist.all_reduce(x)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    out[nbytes] = nbytes / 1e9 / ((time.perf_counter() - start) / iters)
if dist.get_rank() == 0:
    print("RESULT " + json.dumps(out))
dist.destroy_process_group()
'''


def sizes() -> list[int]:
    out, n = [], MIN_BYTES
    while n <= MAX_BYTES:
        out.append(n)
        n *= 2
    return out


def run_doctor(iters: int, warmup: int) -> dict[int, float]:
    argv = [sys.executable, "-m", "ddp_doctor", "bench", "--backend", "gloo", "--nproc", "2", "--ops", "all_reduce",
            "--min-bytes", str(MIN_BYTES), "--max-bytes", str(MAX_BYTES), "--iters", str(iters),
            "--warmup-iters", str(warmup), "--no-check", "--format", "json"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"ddp-doctor bench failed ({proc.returncode}): {proc.stderr[-2000:]}")
    report = json.loads(proc.stdout)
    (result,) = [r for r in report["results"] if r["id"] == "bench.all_reduce"]
    return {int(p["bytes"]): float(p["algbw_gbps"]) for p in result["observed"]["points"]}


def run_handwritten(script: str, iters: int, warmup: int) -> dict[int, float]:
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    argv = [torchrun, "--standalone", "--nproc-per-node", "2", script, json.dumps(sizes()), str(iters), str(warmup)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, start_new_session=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"hand-written loop failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {int(k): float(v) for k, v in json.loads(line[7:]).items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="alternating runs of each (default: 4)")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup-iters", type=int, default=5)
    args = parser.parse_args()
    best_doctor: dict[int, float] = {}
    best_hand: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-vs-hand-") as tmp:
        script = os.path.join(tmp, "handwritten.py")
        Path(script).write_text(HANDWRITTEN)
        for _ in range(args.rounds):
            for size, bw in run_doctor(args.iters, args.warmup_iters).items():
                best_doctor[size] = max(best_doctor.get(size, 0.0), bw)
            for size, bw in run_handwritten(script, args.iters, args.warmup_iters).items():
                best_hand[size] = max(best_hand.get(size, 0.0), bw)
    print(f"{'size':>10}  {'ddp-doctor algbw':>17}  {'hand-written algbw':>18}  {'ratio':>6}")
    worst = 0.0
    for size in sizes():
        doctor, hand = best_doctor[size], best_hand[size]
        ratio = doctor / hand
        worst = max(worst, abs(1.0 - ratio))
        print(f"{size >> 20:>7} MiB  {doctor:>12.3f} GB/s  {hand:>13.3f} GB/s  {ratio:>6.3f}")
    met = worst <= TARGET
    print(f"largest deviation {worst:.1%}; target within {TARGET:.0%} at every size: {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
