"""Time to a verdict of `ddp-doctor check` (2 gloo ranks, every phase) against its yardsticks.

Yardsticks, run in the same script, interleaved, on the same machine:
  minimal   torchrun --standalone --nproc-per-node 2 on a script doing one gloo all_reduce
  min_ddp   the same with DDP() around a Linear and one backward (no target: what any DDP check pays)
  accelerate `accelerate test` with 2 CPU processes (MULTI_CPU), if accelerate is installed
Targets: chain <= 1.3x minimal, chain <= 0.6x accelerate test, parent peak RSS < 100 MB.

    .venv/bin/python benchmarks/bench_live_chain.py [--repeat 3] [--check-arg=--expect-gpus=0 ...]

On a GPU node, hide the GPUs from every yardstick alike (CUDA_VISIBLE_DEVICES= in the environment) and pass
`--check-arg=--expect-gpus=0`, so that the chain runs the same 2 gloo CPU ranks as the yardsticks.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from ddp_doctor.live.launch import find_torchrun

MINIMAL = """\
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
assert t[0].item() == dist.get_world_size()
dist.destroy_process_group()
"""

# Not a target: the floor of any check that uses DDP at all (DDP() imports torch._dynamo).
MINIMAL_DDP = """\
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 1))
model(torch.ones(2, 4)).sum().backward()
dist.barrier()  # without it a rank may tear gloo down under its peer's last message (SIGABRT)
dist.destroy_process_group()
"""

ACCELERATE_CONFIG = """\
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_CPU
num_processes: 2
num_machines: 1
machine_rank: 0
mixed_precision: "no"
use_cpu: true
rdzv_backend: static
same_network: true
main_process_ip: 127.0.0.1
main_process_port: {port}
debug: false
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str], sample_rss: bool = False) -> tuple[float, int, float, float]:
    """(seconds, return code, peak RSS in MB of the process itself (not its children), CPU seconds of the tree)."""
    peak = [0]
    cpu_before = _children_cpu()
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def watch() -> None:
        try:
            p = psutil.Process(proc.pid)
            while proc.poll() is None:
                peak[0] = max(peak[0], p.memory_info().rss)
                time.sleep(0.01)
        except psutil.NoSuchProcess:
            pass

    watcher = threading.Thread(target=watch, daemon=True)
    if sample_rss:
        watcher.start()
    _, err = proc.communicate(timeout=300)
    elapsed = time.monotonic() - started
    if sample_rss:
        watcher.join()
    if proc.returncode != 0:
        sys.stderr.write(f"{argv[:4]} exited {proc.returncode}: {err.decode(errors='replace')[-800:]}\n")
    # Every process of the tree is reaped by its parent, so RUSAGE_CHILDREN covers the ranks too.
    return elapsed, proc.returncode, peak[0] / 2**20, _children_cpu() - cpu_before


def segments(report: Path, t0: float, t1: float) -> dict[str, float]:
    """Where one chain run's wall time went, from the ranks' phase start times (wall clock) in its report:
    up to the first rank's init (parent start-up, torchrun start-up, the rank's torch import), each
    phase (first start to last end over the ranks), and after the last phase (rank teardown, torchrun's
    exit, the parent's verdict and report)."""
    times = json.loads(report.read_text())["facts"]["live"]["phase_times"]
    out = {"to first init": min(r[0]["started"] for r in times.values()) - t0}
    for name in [p["name"] for p in next(iter(times.values()))]:
        recs = [p for r in times.values() for p in r if p["name"] == name]
        out[name] = max(p["started"] + p["duration_s"] for p in recs) - min(p["started"] for p in recs)
    out["after last phase"] = t1 - max(p["started"] + p["duration_s"] for r in times.values() for p in r)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--check-arg", action="append", default=[], help="one more argument for `ddp-doctor check` (repeatable)"
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-live-"))
    try:
        (work / "minimal.py").write_text(MINIMAL)
        (work / "minimal_ddp.py").write_text(MINIMAL_DDP)
        launcher, _ = find_torchrun()
        env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
        # An installed package has its bytecode; without this, a sandbox's PYTHONDONTWRITEBYTECODE=1 makes
        # every run of the chain (parent and each rank) recompile ddp-doctor's own modules, and only those.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        runs: dict[str, list[float]] = {"chain": [], "minimal": [], "min_ddp": [], "accelerate": []}
        cpu: dict[str, list[float]] = {"chain": [], "minimal": [], "min_ddp": [], "accelerate": []}
        rss: list[float] = []
        accelerate = shutil.which("accelerate", path=env["PATH"])
        breakdown: list[dict[str, float]] = []
        for i in range(args.repeat):
            t0 = time.time()
            t, rc, peak, c = timed(
                [
                    sys.executable,
                    "-m",
                    "ddp_doctor",
                    "check",
                    "--format",
                    "json",
                    "--output",
                    str(work / "report.json"),
                    *args.check_arg,
                ],
                env,
                sample_rss=True,
            )
            if rc == 0:
                runs["chain"].append(t)
                cpu["chain"].append(c)
                rss.append(peak)
                breakdown.append(segments(work / "report.json", t0, t0 + t))
            t, rc, _, c = timed([*launcher, "--standalone", "--nproc-per-node", "2", str(work / "minimal.py")], env)
            if rc == 0:
                runs["minimal"].append(t)
                cpu["minimal"].append(c)
            t, rc, _, c = timed([*launcher, "--standalone", "--nproc-per-node", "2", str(work / "minimal_ddp.py")], env)
            if rc == 0:
                runs["min_ddp"].append(t)
                cpu["min_ddp"].append(c)
            if accelerate:
                cfg = work / "accelerate.yaml"
                cfg.write_text(ACCELERATE_CONFIG.format(port=29650 + i))
                t, rc, _, c = timed([accelerate, "test", "--config_file", str(cfg)], env)
                if rc == 0:
                    runs["accelerate"].append(t)
                    cpu["accelerate"].append(c)
        med = {k: statistics.median(v) for k, v in runs.items() if v}
        print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; repeats: {args.repeat}")
        cmed = {k: statistics.median(v) for k, v in cpu.items() if v}
        for k, v in runs.items():
            print(
                f"  {k:<10} "
                + (
                    f"median {med[k]:.2f} s wall, {cmed[k]:.2f} s CPU;  runs {', '.join(f'{x:.2f}' for x in v)}"
                    if v
                    else "not run"
                )
            )
        # Other work on the machine moves single runs by 2x; the fastest runs and the CPU seconds move less.
        if "chain" in med and "minimal" in med:
            print(
                f"chain / minimal torchrun all_reduce: {med['chain'] / med['minimal']:.2f}x  (target <= 1.3x); "
                f"fastest {min(runs['chain']) / min(runs['minimal']):.2f}x; CPU {cmed['chain'] / cmed['minimal']:.2f}x"
            )
        if "chain" in med and "min_ddp" in med:
            print(
                f"chain / minimal DDP() + 1 step:      {med['chain'] / med['min_ddp']:.2f}x  (no target: the floor "
                f"of any DDP check); fastest {min(runs['chain']) / min(runs['min_ddp']):.2f}x; "
                f"CPU {cmed['chain'] / cmed['min_ddp']:.2f}x"
            )
        if "chain" in med and "accelerate" in med:
            print(
                f"chain / accelerate test:             {med['chain'] / med['accelerate']:.2f}x  (target <= 0.6x); "
                f"fastest {min(runs['chain']) / min(runs['accelerate']):.2f}x; "
                f"CPU {cmed['chain'] / cmed['accelerate']:.2f}x"
            )
        elif not accelerate:
            print("accelerate not installed: pip install accelerate (the dev extra) for the second yardstick")
        if breakdown:
            print(
                "chain wall time by stage (medians): "
                + ", ".join(f"{k} {statistics.median(b[k] for b in breakdown):.2f} s" for k in breakdown[0])
            )
        if rss:
            print(f"parent peak RSS: {max(rss):.1f} MB  (target < 100 MB)")
        return 0 if runs["chain"] else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
