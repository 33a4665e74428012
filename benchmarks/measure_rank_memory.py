"""Measure the memory one `ddp-doctor check` / `bench` rank takes, for knowledge/rank_memory.yaml.

Runs the real command a few times and samples the proportional set size (PSS: shared pages split
between the processes that map them, so forked DataLoader workers are not counted twice) of every
process it starts: the torchrun agent, each rank, each rank's DataLoader workers. Prints the peak of
each kind and, for `check`, the batch factor fitted from two --batch-mb values.

    .venv/bin/python benchmarks/measure_rank_memory.py            # about a minute on 2 cores
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

DOCTOR = str(Path(sys.executable).with_name("ddp-doctor"))
MIB = 1 << 20


def _kind(p: psutil.Process, ranks: set[int]) -> str:
    cmd = " ".join(p.cmdline())
    if p.ppid() in ranks:
        return "dataloader_worker"
    if "torch.distributed.run" in cmd or "torchrun" in cmd:  # its argv names the entry module too
        return "agent"
    if "live.worker" in cmd or "bench.worker" in cmd:
        ranks.add(p.pid)
        return "rank"
    return "other"


def peaks(argv: list[str]) -> dict[str, float]:
    """Peak PSS in MiB of one process of each kind, and of all of them together."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    ranks: set[int] = set()
    peak: dict[str, float] = {}
    while proc.poll() is None:
        total = 0.0
        try:
            children = root.children(recursive=True)
        except psutil.Error:
            break
        for child in children:
            try:
                pss = child.memory_full_info().pss / MIB
                kind = _kind(child, ranks)
            except psutil.Error:
                continue
            total += pss
            peak[kind] = max(peak.get(kind, 0.0), pss)
        peak["all"] = max(peak.get("all", 0.0), total)
        time.sleep(0.05)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return {k: round(v, 1) for k, v in sorted(peak.items())}


def main() -> None:
    check = [DOCTOR, "check", "-q", "--format", "json", "--backend", "gloo", "--nproc", "2"]
    small = peaks([*check, "--batch-mb", "32"])
    large = peaks([*check, "--batch-mb", "256"])
    no_workers = peaks([*check, "--batch-mb", "32", "--dataloader-workers", "0"])
    bench = [DOCTOR, "bench", "-q", "--format", "json", "--max-bytes", "64M", "--iters", "2", "--nproc"]
    bench1, bench2 = peaks([*bench, "1"]), peaks([*bench, "2"])
    factor = (large["all"] - small["all"]) / (256 - 32) / 2  # per rank, per MB of batch, 2 workers each
    # A bench rank's buffers: a constant number of messages plus some that grow with the world
    # (all_gather's output, reduce_scatter's input): rank = base + 64M x (fixed + per_rank x nproc).
    buffers1, buffers2 = (bench1["rank"] - no_workers["rank"]) / 64, (bench2["rank"] - no_workers["rank"]) / 64
    print(
        json.dumps(
            {
                "check --batch-mb 32": small,
                "check --batch-mb 256": large,
                "check --dataloader-workers 0": no_workers,
                "bench --max-bytes 64M --nproc 1": bench1,
                "bench --max-bytes 64M --nproc 2": bench2,
                "batch_factor_per_rank_with_2_workers": round(factor, 2),
                "bench_messages_fixed": round(2 * buffers1 - buffers2, 2),
                "bench_messages_per_rank": round(buffers2 - buffers1, 2),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
