"""Overhead of `ddp-doctor run` on a training loop: step time with and without it, in one script.

    python benchmarks/bench_run_overhead.py [--pairs N] [--steps S] [--nproc P]

The loop (a DDP MLP on gloo, or on the GPU with --backend nccl; `torchrun --nproc-per-node P`) times its own steps after a warm-up
and prints the median step time in ms. The same command runs bare and under `ddp-doctor run`
(every observability item on: output capture, faulthandler stack sampling every second, error
files, flight recorder, NVML where present), pairs interleaved so drift hits both alike; the
medians over pairs are compared. Target: ratio < 1.01.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

LOOP = r"""
import os, sys, time, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
backend = sys.argv[2]
dev = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if backend == "nccl" else torch.device("cpu")
if backend == "nccl":
    torch.cuda.set_device(dev)
dist.init_process_group(backend)
torch.manual_seed(0)
width = 4096 if backend == "nccl" else 512
model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width)).to(dev)
model = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(256 if backend == "nccl" else 64, width, device=dev)
times = []
steps = int(sys.argv[1])
for step in range(steps + 20):
    t0 = time.perf_counter()
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if backend == "nccl":
        torch.cuda.synchronize()
    if step % 20 == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
    if step >= 20:
        times.append(time.perf_counter() - t0)
dist.barrier()
if dist.get_rank() == 0:
    times.sort()
    print(f"STEP_MS {1000 * times[len(times) // 2]:.4f}", flush=True)
dist.destroy_process_group()
"""


def _step_ms(argv: list[str], env: dict[str, str]) -> float:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900, check=False)
    m = re.search(r"STEP_MS ([\d.]+)", done.stdout)
    if done.returncode != 0 or not m:
        raise SystemExit(f"{argv[:4]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return float(m.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--doctor-args", default="", help="extra flags for ddp-doctor run (to find what costs)")
    parser.add_argument(
        "--bare-env",
        default="",
        help="VAR=VALUE,... set for both runs (e.g. TORCH_FR_BUFFER_SIZE=0: what the flight recorder costs by itself)",
    )
    args = parser.parse_args()
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src, "NO_COLOR": "1"}
    env.update(dict(kv.split("=", 1) for kv in args.bare_env.split(",") if "=" in kv))
    beside = Path(sys.executable).with_name("torchrun")
    torchrun = [str(beside)] if beside.exists() else [sys.executable, "-m", "torch.distributed.run"]
    with tempfile.TemporaryDirectory(prefix="ddp-doctor-bench-run-") as tmp:
        loop = Path(tmp) / "loop.py"
        loop.write_text(LOOP)
        job = [*torchrun, "--nproc-per-node", str(args.nproc), str(loop), str(args.steps), args.backend]
        bare, watched = [], []
        for i in range(args.pairs):
            extra = args.doctor_args.split()
            doctor = [sys.executable, "-m", "ddp_doctor", "run", "--run-dir", f"{tmp}/run{i}", *extra, "--", *job]
            order = [(bare, job), (watched, doctor)] if i % 2 == 0 else [(watched, doctor), (bare, job)]
            for sink, argv in order:
                sink.append(_step_ms(argv, env))
            print(
                f"pair {i + 1}: bare {bare[-1]:.3f} ms/step, under ddp-doctor run {watched[-1]:.3f} ms/step", flush=True
            )
    b, w = statistics.median(bare), statistics.median(watched)
    ratio = w / b
    # Each pair ran back to back, so its own ratio cancels the drift of a shared machine; their spread is the noise.
    pair_ratios = sorted(x / y for x, y in zip(watched, bare, strict=True))
    print(f"median step time: bare {b:.3f} ms, under ddp-doctor run {w:.3f} ms; ratio {ratio:.4f} (target < 1.01)")
    print(
        f"per-pair ratios: median {statistics.median(pair_ratios):.4f}, "
        f"range {pair_ratios[0]:.3f}-{pair_ratios[-1]:.3f} over {len(pair_ratios)} pairs"
    )
    return 0 if ratio < 1.01 else 1


if __name__ == "__main__":
    raise SystemExit(main())
