"""How fast and how lean is `ddp-doctor explain` on a big log? Prints MB/s, peak RSS and ratios.

    .venv/bin/python benchmarks/bench_explain.py [--size-mb 1024] [--keep FILE]

Generates a log of the given size (healthy NCCL_DEBUG=INFO lines, rank-prefixed training
output, torchrun chatter, a few hundred failure lines sprinkled in, one ANSI-coloured and one
non-UTF-8 line per block), then times, on the same file:
  - `ddp-doctor explain FILE --format json` as a real process (the thing measured),
  - `grep -c ERROR FILE`                    (yardstick: what a C line scanner does),
  - a plain Python `for line in f` loop    (yardstick: the floor for any per-line Python tool).
Also runs explain on a file holding one 100 MB line, to show line length does not grow memory.
Targets (issue 4): >= 50 MB/s and < 200 MB peak RSS for a 1 GB log on the 2-core dev machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEALTHY = [
    "node-{n}:{pid}:{tid} [{g}] NCCL INFO Channel {c:02d}/0 : {g}[{g}] -> {h}[{h}] via P2P/CUMEM/read",
    "node-{n}:{pid}:{tid} [{g}] NCCL INFO Channel {c:02d} : {g}[{g}] -> {h}[{h}] via SHM/direct/direct",
    "[rank{g}]: step {i} loss {x:.4f} lr 3.0e-04 tokens/s 181234.5 grad_norm {x:.3f}",
    "[default{g}]:{{'train/loss': {x:.4f}, 'train/step': {i}, 'epoch': 0.{c}}}",
    "W1202 10:{c:02d}:00.000000 {pid} torch/distributed/elastic/agent/server/api.py:720] [default] worker group healthy",
    "Epoch 0:  {c}%|#####     | {i}/100000 [01:{c:02d}<02:00, 12.3it/s, loss={x:.3f}]",
]
FAILURES = [
    "[rank{g}]: RuntimeError: DataLoader worker (pid {pid}) is killed by signal: Bus error. It is possible",
    "node-{n}:{pid}:{tid} [{g}] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes",
    "[rank{g}]:[E1202 ProcessGroupNCCL.cpp:629] [Rank {g}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={i})",
    "[rank{g}]: ValueError: unexpected batch shape {i}",
]


def generate(path: Path, size_mb: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    target = size_mb << 20
    written = 0
    with path.open("wb") as f:
        while written < target:
            block = []
            for i in range(20_000):
                fmt = HEALTHY[rng.randrange(len(HEALTHY))]
                g = rng.randrange(8)
                block.append(
                    fmt.format(
                        n=g // 4, pid=1000 + g, tid=2000 + i % 97, g=g, h=(g + 1) % 8, c=i % 32, i=i, x=rng.random()
                    )
                )
            g = rng.randrange(8)
            block.append(FAILURES[rng.randrange(len(FAILURES))].format(n=0, pid=99, tid=1, g=g, i=7))
            block.append("\x1b[32m[rank0]: step ok\x1b[0m")
            data = ("\n".join(block) + "\n").encode() + b"\xff\xfe not utf-8 \xc3\x28\n"
            f.write(data)
            written += len(data)
    return written


def timed(argv: list[str]) -> tuple[float, int, bytes]:
    """Wall seconds, peak RSS (bytes) of the child, its stdout."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read() if proc.stdout else b""
    _, _, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - start, usage.ru_maxrss * 1024, out


LOOP = "import sys\nn = 0\nwith open(sys.argv[1], 'rb') as f:\n    for line in f:\n        n += 1\nprint(n)\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--keep", metavar="FILE", help="write the generated log here and keep it")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-explain-"))
    log = Path(args.keep) if args.keep else tmp / "big.log"
    try:
        size = generate(log, args.size_mb)
        mb = size / 1e6
        doctor = [sys.executable, "-m", "ddp_doctor", "explain", str(log), "--format", "json"]
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # same page-cache state for all
        t_doc, rss_doc, out = timed(doctor)
        report = json.loads(out)
        t_grep, rss_grep, _ = timed(["grep", "-c", "ERROR", str(log)])
        t_loop, rss_loop, _ = timed([sys.executable, "-c", LOOP, str(log)])
        line = tmp / "one-line.log"
        with line.open("wb") as f:
            for _ in range(100):  # in 1 MB pieces: a forked child would otherwise count a 100 MB parent buffer
                f.write(b"x" * (1 << 20))
            f.write(b" RuntimeError: CUDA error: invalid device ordinal\n")
        t_line, rss_line, out_line = timed(
            [sys.executable, "-m", "ddp_doctor", "explain", str(line), "--format", "json"]
        )
        line_ids = [r["id"] for r in json.loads(out_line)["results"]]
        fallback_mb = min(mb, 100.0)  # the stdlib-re fallback, on the first 100 MB only (it is slow)
        part = tmp / "part.log"
        with log.open("rb") as src, part.open("wb") as dst:
            dst.write(src.read(int(fallback_mb * 1e6)))
        env = {**os.environ, "DDP_DOCTOR_REGEX": "re"}
        start = time.perf_counter()
        subprocess.run([*doctor[:4], str(part), "--format", "json"], env=env, stdout=subprocess.DEVNULL, check=False)
        t_re = time.perf_counter() - start
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()

    ids = [r["id"] for r in report["results"]]
    print(
        f"log: {mb:,.0f} MB, {report['facts']['log']['lines']:,} lines, regex engine {report['facts']['log']['regex_engine']}"
    )
    print(
        f"explain      {t_doc:7.2f} s  {mb / t_doc:8.1f} MB/s  peak RSS {rss_doc / 2**20:6.1f} MiB  -> root cause {report['root_cause']}, {ids}"
    )
    print(f"grep -c      {t_grep:7.2f} s  {mb / t_grep:8.1f} MB/s  peak RSS {rss_grep / 2**20:6.1f} MiB")
    print(f"python loop  {t_loop:7.2f} s  {mb / t_loop:8.1f} MB/s  peak RSS {rss_loop / 2**20:6.1f} MiB")
    print(f"ratio: explain takes {t_doc / t_grep:.2f}x grep's time and {t_doc / t_loop:.2f}x a bare Python line loop's")
    print(f"fallback without google-re2 (stdlib re), first {fallback_mb:.0f} MB: {fallback_mb / t_re:.1f} MB/s")
    print(f"100 MB single line: {t_line:.2f} s, peak RSS {rss_line / 2**20:.1f} MiB -> {line_ids}")
    ok = (
        mb / t_doc >= 50
        and rss_doc < 200 * 2**20
        and rss_line < 200 * 2**20
        and "diag.invalid_device_ordinal" in line_ids
    )
    print("targets (>= 50 MB/s, < 200 MiB RSS, long line diagnosed):", "MET" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
