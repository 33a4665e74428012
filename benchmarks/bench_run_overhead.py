"""Overhead of `ddp-doctor run` on a training loop: step time with and without it, in one script.

    python benchmarks/bench_run_overhead.py [--pairs N] [--steps S] [--nproc P]

The loop (a DDP MLP on gloo, or on the GPU with --backend nccl; `torchrun --nproc-per-node P`) times its own steps after a warm-up
and prints the median step time in ms. The same command runs bare and under `ddp-doctor run`
(every observability item on: output capture, faulthandler stack sampling every second, error
files, flight recorder, NVML where present), pairs interleaved so drift hits both alike; the
medians over pairs are compared. Target: ratio < 1.01.

Wall time on a machine shared with other work swings by tens of percent from run to run, far more
than 1 %. So the loop also reports the CPU time its ranks spend per step (process CPU, every thread,
averaged over the ranks: what the doctor's hook, signals and the flight recorder add inside a rank),
and the bench samples the doctor's own process CPU over the same window (what it takes from the
machine beside the ranks). On a node where the ranks keep their cores, the rank CPU ratio is the step
time cost; the doctor's share says what it needs of a spare core.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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
    if step == 20:
        cpu0, wall0 = time.process_time(), time.time()
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
cpu = torch.tensor([(time.process_time() - cpu0) / steps * 1000])
wall1 = time.time()
cpu = cpu.to(dev)
dist.all_reduce(cpu)
dist.barrier()
if dist.get_rank() == 0:
    times.sort()
    print(f"STEP_MS {1000 * times[len(times) // 2]:.4f}", flush=True)
    print(f"CPU_MS {cpu.item() / dist.get_world_size():.4f} WINDOW {wall0:.3f} {wall1:.3f}", flush=True)
dist.destroy_process_group()
"""


def _proc_cpu_s(pid: int) -> float | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Run:
    step_ms: float
    cpu_ms: float
    """CPU per step per rank (every thread of the rank process)."""
    own_cores: float | None
    """The launched process's own CPU over the loop's window, in cores (the doctor's, when it is the doctor)."""


def _run(argv: list[str], env: dict[str, str]) -> Run:
    """Run the job; sample the launched process's own CPU (the doctor, when it is the doctor) 5 times a second."""
    samples: list[tuple[float, float]] = []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        deadline = time.monotonic() + 900
        while proc.poll() is None and time.monotonic() < deadline:
            cpu = _proc_cpu_s(proc.pid)
            if cpu is not None:
                samples.append((time.time(), cpu))
            time.sleep(0.2)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    m = re.search(r"STEP_MS ([\d.]+)", stdout)
    c = re.search(r"CPU_MS ([\d.]+) WINDOW ([\d.]+) ([\d.]+)", stdout)
    if proc.returncode != 0 or not m or not c:
        raise SystemExit(f"{argv[:4]} failed ({proc.returncode}): {stderr[-2000:]}")
    cpu_ms, w0, w1 = float(c.group(1)), float(c.group(2)), float(c.group(3))
    inside = [cpu for t, cpu in samples if w0 <= t <= w1]
    share = (inside[-1] - inside[0]) / (w1 - w0) if len(inside) >= 2 and w1 > w0 else None
    return Run(float(m.group(1)), cpu_ms, share)


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
    parser.add_argument(
        "--instead-env",
        default="",
        help="VAR=VALUE,...: the second arm is the bare job with these set, not the doctor (e.g. TORCH_FR_BUFFER_SIZE=0: "
        "what torch's own flight recorder costs, on by default since torch 2.6)",
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
        arm = f"bare with {args.instead_env}" if args.instead_env else "under ddp-doctor run"
        bare_runs: list[Run] = []
        watched_runs: list[Run] = []
        for i in range(args.pairs):
            extra = args.doctor_args.split()
            doctor = [sys.executable, "-m", "ddp_doctor", "run", "--run-dir", f"{tmp}/run{i}", *extra, "--", *job]
            order = (
                [(bare_runs, job), (watched_runs, doctor)] if i % 2 == 0 else [(watched_runs, doctor), (bare_runs, job)]
            )
            for sink, argv in order:
                sink.append(_run(argv, env))
            br, wr = bare_runs[-1], watched_runs[-1]
            own = "" if args.instead_env else f"; the doctor {100 * (wr.own_cores or 0):.2f}% of a core"
            print(
                f"pair {i + 1}: bare {br.step_ms:.3f} ms/step ({br.cpu_ms:.3f} ms CPU/step/rank), "
                f"{arm} {wr.step_ms:.3f} ms/step ({wr.cpu_ms:.3f} ms CPU/step/rank{own})",
                flush=True,
            )
    bare = [r.step_ms for r in bare_runs]
    watched = [r.step_ms for r in watched_runs]
    b, w = statistics.median(bare), statistics.median(watched)
    ratio = w / b
    # Each pair ran back to back, so its own ratio cancels the drift of a shared machine; their spread is the noise.
    pair_ratios = sorted(x / y for x, y in zip(watched, bare, strict=True))
    arm = f"bare with {args.instead_env}" if args.instead_env else "under ddp-doctor run"
    print(f"median step time: bare {b:.3f} ms, {arm} {w:.3f} ms; ratio {ratio:.4f} (target < 1.01)")
    print(
        f"per-pair ratios: median {statistics.median(pair_ratios):.4f}, "
        f"range {pair_ratios[0]:.3f}-{pair_ratios[-1]:.3f} over {len(pair_ratios)} pairs"
    )
    bc = statistics.median(r.cpu_ms for r in bare_runs)
    wc = statistics.median(r.cpu_ms for r in watched_runs)
    cpu_pairs = sorted(x.cpu_ms / y.cpu_ms for x, y in zip(watched_runs, bare_runs, strict=True))
    cores = [r.own_cores for r in watched_runs if r.own_cores is not None]
    print(
        f"rank CPU per step: bare {bc:.3f} ms, {arm} {wc:.3f} ms; cpu ratio {wc / bc:.4f} "
        f"(per pair {cpu_pairs[0]:.3f}-{cpu_pairs[-1]:.3f})"
    )
    if cores and not args.instead_env:
        print(f"the doctor's own process: median {100 * statistics.median(cores):.2f}% of one core during the loop")
    return 0 if ratio < 1.01 else 1


if __name__ == "__main__":
    raise SystemExit(main())
