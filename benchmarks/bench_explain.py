"""explain against grep on the same big log, in one script: prints MB/s, peak RSS and the ratio.

    .venv/bin/python benchmarks/bench_explain.py [--size-mb 500] [--runs 3] [--log FILE] [--keep FILE]

The log is realistic multi-rank NCCL_DEBUG=INFO output (16 ranks on 2 nodes: init, channels, one
`AllReduce: opCount` line per collective with NCCL_DEBUG_SUBSYS=COLL, `[rankN]:` training lines, HF-style
dicts) ending with torchrun's summary of a SIGKILLed rank. On the same file, alternately, --runs times:
  - `grep -ciE '<cue words>' FILE > out.txt`  (yardstick; the cue words are readers.yaml `cues`; grep writes
    to a file because GNU grep stops at the first match when its output is /dev/null),
  - `ddp-doctor explain FILE --format json -o out.json` as a real process, once per available engine.
The ratio is grep's time / explain's time (explain's throughput as a fraction of grep's), best and median.
Targets (issue 17): ratio >= 0.25 (moonshot 0.5), peak RSS < 200 MB on 500 MB, root cause diag.sigkill_oom.
The machine is shared: the load average before and after is printed with the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

SRC = Path(__file__).resolve().parents[1] / "src"


def generate(path: Path, size_mb: int, seed: int = 7) -> int:
    rng = random.Random(seed)
    target = size_mb << 20
    nodes, gpus = 2, 8
    pids = {(n, g): 4100 + n * 100 + g for n in range(nodes) for g in range(gpus)}
    written = 0
    with open(path, "wb") as f:

        def w(s: str) -> None:
            nonlocal written
            b = s.encode()
            f.write(b)
            written += len(b)

        # init
        out = []
        for n in range(nodes):
            for g in range(gpus):
                h, pid, tid, r = f"gpu-node-{n}", pids[(n, g)], pids[(n, g)] + 37, n * gpus + g
                out += [
                    f"{h}:{pid}:{pid} [{g}] NCCL INFO Bootstrap : Using eth0:10.1.0.{n + 2}<0>",
                    f"{h}:{pid}:{pid} [{g}] NCCL INFO NET/Plugin: No plugin found (libnccl-net.so)",
                    f"{h}:{pid}:{pid} [{g}] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory : when loading libnccl-net.so",
                    f"{h}:{pid}:{pid} [{g}] NCCL INFO cudaDriverVersion 12040",
                    "NCCL version 2.21.5+cuda12.4",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.1.0.{n + 2}<0>",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO Using non-device net plugin version 0",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO Using network IB",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO comm 0x55d{r:03x}c0 rank {r} nRanks 16 nNodes 2 localRanks 8 localRank {g} MNNVL 0",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO Setting affinity for GPU {g} to ffff,ffffffff",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO Trees [0] {r + 1}/-1/-1->{r}->{max(r - 1, 0)} [1] {r + 1}/-1/-1->{r}->{max(r - 1, 0)}",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO P2P Chunksize set to 524288",
                ]
                for c in range(24):
                    out.append(
                        f"{h}:{pid}:{tid} [{g}] NCCL INFO Channel {c:02d}/0 : {r}[{g}] -> {(r + 1) % 16}[{(g + 1) % 8}] via P2P/CUMEM/read"
                    )
                out += [
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO Connected all rings",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO Connected all trees",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO 24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
                    f"{h}:{pid}:{tid} [{g}] NCCL INFO ncclCommInitRank comm 0x55d{r:03x}c0 rank {r} nranks 16 cudaDev {g} nvmlDev {g} busId {g + 1}8000 commId 0x5d1c0ffee - Init COMPLETE",
                ]
        w("\n".join(out) + "\n")
        step, op = 0, 0
        while written < target:
            block = []
            for _ in range(2000):
                n, g = rng.randrange(nodes), rng.randrange(gpus)
                h, pid, r = f"gpu-node-{n}", pids[(n, g)], n * gpus + g
                k = rng.random()
                if k < 0.80:
                    op += 1
                    block.append(
                        f"{h}:{pid}:{pid} [{g}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x7f3a{op:08x} recvbuff 0x7f3a{op:08x} count {rng.choice((1048576, 262144, 4194304))} datatype 7 op 0 root 0 comm 0x55d{r:03x}c0 [nranks=16] stream 0x5611a0"
                    )
                elif k < 0.90:
                    step += 1
                    block.append(
                        f"[rank{r}]:[2026-12-03 10:{step // 600 % 60:02d}:{step // 10 % 60:02d}] step {step} loss {rng.random() * 3:.4f} lr 3.0e-04 tokens/s {rng.randrange(150000, 190000)} grad_norm {rng.random():.3f}"
                    )
                elif k < 0.95:
                    block.append(
                        f"{h}:{pid}:{pid} [{g}] NCCL INFO Broadcast: opCount {op:x} sendbuff 0x7f3a00 recvbuff 0x7f3a00 count 2048 datatype 0 op 0 root 0 comm 0x55d{r:03x}c0 [nranks=16] stream 0x5611a0"
                    )
                else:
                    block.append(
                        f"{{'loss': {rng.random() * 3:.4f}, 'grad_norm': {rng.random():.4f}, 'learning_rate': 2.9e-05, 'epoch': 0.{step % 100:02d}}}"
                    )
            w("\n".join(block) + "\n")
        # the end: rank 5 SIGKILLed
        w("""W1203 10:41:07.118000 4096 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4100 closing signal SIGTERM
W1203 10:41:07.119000 4096 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4101 closing signal SIGTERM
E1203 10:41:08.421000 4096 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 5 (pid: 4105) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/local/bin/torchrun", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-03_10:41:07
  host      : gpu-node-0
  rank      : 5 (local_rank: 5)
  exitcode  : -9 (pid: 4105)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 4105
============================================================
""")
    return written


def timed(
    argv: list[str], env: dict[str, str] | None = None, stdout: int | None = subprocess.DEVNULL
) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (bytes) of the child."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0 and os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{argv[0]} failed: {status}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def cues() -> list[str]:
    data = yaml.safe_load((SRC / "ddp_doctor" / "diagnose" / "readers.yaml").read_text())
    return [str(c) for c in data["cues"]]


def engines() -> list[str]:
    out = []
    for name in ("hyperscan", "re2"):
        try:
            __import__(name)
        except ImportError:
            continue
        out.append(name)
    return out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--log", metavar="FILE", help="measure this existing log instead of generating one")
    parser.add_argument("--keep", metavar="FILE", help="write the generated log here and keep it")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-explain-"))
    log = Path(args.log or args.keep or tmp / "big.log")
    load_before = load()
    try:
        if not args.log:
            generate(log, args.size_mb)
        mb = log.stat().st_size / 1e6
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm page cache for both
        pattern = "|".join(cues())
        grep = ["grep", "-ciE", pattern, str(log)]
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        runs: dict[str, list[tuple[float, float, int]]] = {"grep": []}
        report: dict[str, object] = {}
        for _ in range(args.runs):
            with (tmp / "grep.txt").open("wb") as out:
                runs["grep"].append(timed(grep, stdout=out.fileno()))
            for engine in engines():
                out_json = tmp / f"{engine}.json"
                argv = [
                    sys.executable,
                    "-m",
                    "ddp_doctor",
                    "explain",
                    str(log),
                    "--format",
                    "json",
                    "-o",
                    str(out_json),
                ]
                runs.setdefault(engine, []).append(timed(argv, env={**env, "DDP_DOCTOR_REGEX": engine}))
                report[engine] = json.loads(out_json.read_text())
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()
    g_best = min(w for w, _, _ in runs["grep"])
    g_med = statistics.median(w for w, _, _ in runs["grep"])
    g_cpu = min(c for _, c, _ in runs["grep"])
    print(
        f"log: {log.name if args.log else 'generated'}, {mb:,.0f} MB; {args.runs} runs each; load average before: {load_before}"
    )
    print(f"yardstick: grep -ciE '{pattern}' FILE > out.txt")
    print(
        f"grep                   best {g_best:6.2f} s ({mb / g_best:7.1f} MB/s)  median {g_med:6.2f} s  cpu {g_cpu:5.2f} s"
    )
    ok = True
    for engine in engines():
        rs = runs[engine]
        best = min(w for w, _, _ in rs)
        med = statistics.median(w for w, _, _ in rs)
        cpu = min(c for _, c, _ in rs)
        rss = max(r for _, _, r in rs)
        rep = report[engine]
        assert isinstance(rep, dict)
        root = rep.get("root_cause")
        print(
            f"explain ({engine:9s})  best {best:6.2f} s ({mb / best:7.1f} MB/s)  median {med:6.2f} s  cpu {cpu:5.2f} s  "
            f"peak RSS {rss / 2**20:6.1f} MiB  root cause {root}"
        )
        print(
            f"  ratio to grep: {g_best / best:.2f}x best-to-best, {g_med / med:.2f}x median, {g_cpu / cpu:.2f}x by CPU time"
        )
        if engine == engines()[0]:
            ok = g_best / best >= 0.25 and rss < 200 * 2**20 and root == "diag.sigkill_oom"
    print(f"load average after: {load()}")
    print("targets (ratio >= 0.25x grep, < 200 MiB peak RSS, root cause diag.sigkill_oom):", "MET" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
