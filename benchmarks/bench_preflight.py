"""What the preflight adds to a job's start, on this machine, in one run.

    python benchmarks/bench_preflight.py [--repeat N]

`launch --preflight` runs `ddp-doctor check --static` (or, with `--preflight live`, the one-node live chain)
on every node before the job's own command. Yardstick: the start of a real 2-rank torchrun + gloo DDP job up
to its first finished step (torch import, rendezvous, init_process_group, DDP wrap, one step), what every
job pays anyway. Commands run interleaved N times; medians are compared. The preflight's bound is 60 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIRST_STEP = """
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(64, 8))
model(torch.randn(32, 64)).sum().backward()
dist.destroy_process_group()
"""
BIN = Path(sys.executable).parent


def _time(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd, timeout=300, check=False
    )
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):  # check exits 1 on a failing environment; that is still a full run
        raise SystemExit(f"{' '.join(argv)} exited with {done.returncode}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per command (default 3)")
    args = parser.parse_args()
    env = {**os.environ, "NO_COLOR": "1", "PYTHONWARNINGS": "ignore"}
    with tempfile.TemporaryDirectory(prefix="bench-preflight-") as tmp:
        script = Path(tmp, "first_step.py")
        script.write_text(FIRST_STEP)
        commands = {
            "job_first_step": [str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", str(script)],
            "preflight_static": [str(BIN / "ddp-doctor"), "check", "--static"],
            "preflight_live": [
                str(BIN / "ddp-doctor"),
                "check",
                "--timeout",
                "45",
                "--nproc",
                "2",
                "--backend",
                "gloo",
            ],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.repeat):
            for name, argv in commands.items():
                times[name].append(_time(argv, env, tmp))
    median = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"{name:18} median {median[name]:6.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    base = median["job_first_step"]
    for name in ("preflight_static", "preflight_live"):
        print(f"{name} / job_first_step = {median[name] / base:.2f}  (adds {median[name]:.1f} s to each node's start)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
