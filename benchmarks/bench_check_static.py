"""Time `ddp-doctor check --static` against its two yardsticks, on this machine, in one run.

    python benchmarks/bench_check_static.py [--repeat N]

Yardsticks: a bare `python -c "import torch"` (the floor for any check that proves torch
imports) and `python -m torch.utils.collect_env` (what people run today). Each command runs
N times, interleaved so drift hits all three alike; medians are compared.
Targets: check/import <= 1.15, check/collect_env < 1.0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "import_torch": [sys.executable, "-c", "import torch"],
    "collect_env": [sys.executable, "-m", "torch.utils.collect_env"],
    "check_static": [sys.executable, "-m", "ddp_doctor", "check", "--static", "--format", "text"],
}


def _time(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=300, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):  # check exits 1 on a failing environment; that is still a full run
        raise SystemExit(f"{' '.join(argv)} exited with {done.returncode}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="runs per command (default 9)")
    args = parser.parse_args()
    env = {**os.environ, "NO_COLOR": "1", "PYTHONWARNINGS": "ignore"}
    for argv in COMMANDS.values():  # warm the page cache once
        _time(argv, env)
    samples: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, argv in COMMANDS.items():
            samples[name].append(_time(argv, env))
    med = {name: statistics.median(v) for name, v in samples.items()}
    for name, v in samples.items():
        print(f"{name:13s} median {med[name]:.3f} s  (min {min(v):.3f}, max {max(v):.3f}, n={len(v)})")
    r_import = med["check_static"] / med["import_torch"]
    r_collect = med["check_static"] / med["collect_env"]
    print(f"ratio check_static / import_torch = {r_import:.2f}x  (target <= 1.15x)")
    print(f"ratio check_static / collect_env  = {r_collect:.2f}x  (target < 1.00x)")
    print(f"ratio import_torch / collect_env  = {med['import_torch'] / med['collect_env']:.2f}x  (for reference)")
    # Runs of one round are back to back, so a per-round ratio cancels slow drifts in machine load.
    paired_i = statistics.median(c / i for c, i in zip(samples["check_static"], samples["import_torch"]))
    paired_c = statistics.median(c / e for c, e in zip(samples["check_static"], samples["collect_env"]))
    print(f"paired per-round medians: check/import {paired_i:.2f}x, check/collect_env {paired_c:.2f}x")
    # The fastest run of each is the one least disturbed by other work on the machine.
    fastest = {name: min(v) for name, v in samples.items()}
    print(
        f"fastest runs: check/import {fastest['check_static'] / fastest['import_torch']:.2f}x, "
        f"check/collect_env {fastest['check_static'] / fastest['collect_env']:.2f}x"
    )
    return 0 if r_import <= 1.15 and r_collect < 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
