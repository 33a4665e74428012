"""explain against grep on two big logs, in one script: prints MB/s, peak RSS and the ratio for each.

    .venv/bin/python benchmarks/bench_explain.py [--size-mb 500] [--runs 3] [--log FILE] [--keep DIR]

The two logs (generated, --size-mb each) are the two shapes NCCL_DEBUG=INFO output takes:
  dense   healthy communicators' start-up lines over and over (16 ranks on 2 nodes; a TP/PP/FSDP job makes
          one communicator per process group and an elastic job again at every restart), from real NCCL
          2.18-2.28 lines (see _COMM_INIT): about one line in six holds a cue word;
  sparse  one job's init once, then one `AllReduce: opCount` trace line per collective
          (NCCL_DEBUG_SUBSYS=COLL), `[rankN]:` training lines and HF-style dicts: few hits.
Both end with torchrun's summary of a SIGKILLed rank. On the same file, alternately, --runs times:
  - `grep -ciE '<cue words>' FILE > out.txt`  (yardstick; the cue words are readers.yaml `cues`; grep writes
    to a file because GNU grep stops at the first match when its output is /dev/null),
  - `ddp-doctor explain FILE --format json -o out.json` as a real process, once per available engine.
The ratio is grep's time / explain's time (explain's throughput as a fraction of grep's), best and median.
Targets: median ratio >= 0.25 on both logs (moonshot 0.5; the median, so that one lucky run on a shared machine
cannot meet it), peak RSS < 200 MB on 500 MB, root cause diag.sigkill_oom.
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
from typing import Any

import yaml

SRC = Path(__file__).resolve().parents[1] / "src"


ENDING = """W1203 10:41:07.118000 4096 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 4100 closing signal SIGTERM
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
"""
"""The end of both logs: torchrun's summary of rank 5, SIGKILLed (what explain must name)."""


def generate_sparse(path: Path, size_mb: int, seed: int = 7) -> int:
    """Init lines once, then per-collective trace lines that hit nothing: the log of one long job."""
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
        w(ENDING)
    return written


# One communicator's NCCL_DEBUG=INFO start-up on one rank, line for line as NCCL 2.18-2.28 print it. The
# wordings are copied from real logs: the H200 recording tests/fixtures/gpu/diagnose/cases.log (NCCL 2.28:
# "Failed to initialize NET plugin IB", "PROFILER/Plugin: Could not find", the Init START / COMPLETE pair) and
# pastes in public threads (NCCL 2.18-2.21 with an RDMA / SHARP plugin: NVIDIA/nccl#1000, aws/aws-ofi-nccl#715,
# NVIDIA/Megatron-LM#516: "NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.", "... ncclCollNetPlugin symbols
# v4 and lower are not supported."). A TP/PP/FSDP job creates one communicator per process group and an elastic
# job again at every restart, so these lines come back many times in one log.
_COMM_INIT = (
    "{p} NCCL INFO cudaDriverVersion 12040",
    "{p} NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
    "{p} NCCL INFO Bootstrap : Using eth0:10.0.{n}.{g}<0>",
    "{p} NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
    "{p} NCCL INFO NET/Plugin: Loaded net plugin NCCL RDMA Plugin v6 (v6)",
    "{p} NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin_v8 symbol.",
    "{p} NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin symbol (>= v5). ncclCollNetPlugin symbols v4 and lower are not supported.",
    "{p} NCCL INFO Failed to initialize NET plugin IB",
    "{p} NCCL INFO NET/Socket : Using [0]eth0:10.0.{n}.{g}<0>",
    "{p} NCCL INFO Using network Socket",
    "{p} NCCL INFO ncclCommInitRank comm 0x{c:x} rank {r} nranks 16 cudaDev {g} nvmlDev {g} busId {g}8000 commId 0x{c:x}5eed - Init START",
    "{p} NCCL INFO Setting affinity for GPU {g} to ffff,ffffffff",
    "{p} NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.",
    "{p} NCCL INFO comm 0x{c:x} rank {r} nRanks 16 nNodes 2 localRanks 8 localRank {g} MNNVL 0",
    "{p} NCCL INFO Channel 00/08 : 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15",
    "{p} NCCL INFO Channel 01/08 : 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15",
    "{p} NCCL INFO Channel 02/08 : 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15",
    "{p} NCCL INFO Channel 03/08 : 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15",
    "{p} NCCL INFO Trees [0] {r1}/-1/-1->{r}->{r0} [1] {r1}/-1/-1->{r}->{r0}",
    "{p} NCCL INFO P2P Chunksize set to 131072",
    "{p} NCCL INFO PROFILER/Plugin: Could not find: libnccl-profiler.so",
    "{p} NCCL INFO Channel 00/0 : {r}[{g}] -> {r1}[{g1}] via P2P/CUMEM/read",
    "{p} NCCL INFO Channel 01/0 : {r}[{g}] -> {r1}[{g1}] via P2P/CUMEM/read",
    "{p} NCCL INFO Connected all rings",
    "{p} NCCL INFO Connected all trees",
    "{p} NCCL INFO threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
    "{p} NCCL INFO 8 coll channels, 8 collnet channels, 0 nvls channels, 8 p2p channels, 2 p2p channels per peer",
    "{p} NCCL INFO TUNER/Plugin: Failed to find ncclTunerPlugin_v2 symbol, using internal tuner instead.",
    "{p} NCCL INFO CC Off, workFifoBytes 1048576",
    "{p} NCCL INFO ncclCommInitRank comm 0x{c:x} rank {r} nranks 16 cudaDev {g} nvmlDev {g} busId {g}8000 commId 0x{c:x}5eed - Init COMPLETE",
)


def generate_dense(path: Path, size_mb: int, seed: int = 7) -> int:
    """Healthy communicators' NCCL_DEBUG=INFO start-up, over and over (16 ranks on 2 nodes), then the ending."""
    rng = random.Random(seed)
    target = size_mb << 20
    written = 0
    comm = 0x55D000C0
    with open(path, "wb") as f:
        while written < target:
            block = []
            for _ in range(16):  # one process group: every rank sets up its communicator, interleaved per line
                comm += 0x1F40
                ranks = list(range(16))
                rng.shuffle(ranks)
                rows = []
                for r in ranks:
                    n, g = divmod(r, 8)
                    pid = 4100 + 100 * n + g
                    prefix = f"gpu-node-{n}:{pid}:{pid + rng.randrange(1, 60)} [{g}]"
                    fields = {
                        "p": prefix,
                        "n": n,
                        "g": g,
                        "r": r,
                        "c": comm,
                        "r1": (r + 1) % 16,
                        "r0": max(r - 1, 0),
                        "g1": (g + 1) % 8,
                    }
                    rows.append([t.format(**fields) for t in _COMM_INIT])
                for i in range(len(_COMM_INIT)):
                    block.extend(row[i] for row in rows)
                block.append(f"[rank0]:[2026-12-03 10:{comm % 60:02d}:00] created process group {comm:x} (16 ranks)")
            data = ("\n".join(block) + "\n").encode()
            f.write(data)
            written += len(data)
        data = ENDING.encode()
        f.write(data)
        written += len(data)
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


def measure(log: Path, runs: int, tmp: Path) -> dict[str, list[tuple[float, float, int]] | dict[str, object]]:
    """grep and every engine, alternately on the same warm file, `runs` times each."""
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm page cache for both
    grep = ["grep", "-ciE", "|".join(cues()), str(log)]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    times: dict[str, list[tuple[float, float, int]]] = {"grep": []}
    reports: dict[str, object] = {}
    for _ in range(runs):
        with (tmp / "grep.txt").open("wb") as out:
            times["grep"].append(timed(grep, stdout=out.fileno()))
        for engine in engines():
            out_json = tmp / f"{engine}.json"
            argv = [sys.executable, "-m", "ddp_doctor", "explain", str(log), "--format", "json", "-o", str(out_json)]
            times.setdefault(engine, []).append(timed(argv, env={**env, "DDP_DOCTOR_REGEX": engine}))
            reports[engine] = json.loads(out_json.read_text())
    return {**times, "reports": reports}


def cue_share(log: Path) -> float:
    with log.open("rb") as f:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 22), b""))
    hits = subprocess.run(["grep", "-ciE", "|".join(cues()), str(log)], capture_output=True, text=True, check=False)
    return int(hits.stdout.strip() or 0) / max(lines, 1)


def report(name: str, log: Path, got: dict[str, Any]) -> bool:
    """Print one log's numbers; True when the primary engine meets the targets."""
    mb = log.stat().st_size / 1e6
    grep = got["grep"]
    g_best = min(w for w, _, _ in grep)
    g_med = statistics.median(w for w, _, _ in grep)
    g_cpu = min(c for _, c, _ in grep)
    print(f"{name} log: {mb:,.0f} MB, {cue_share(log):.1%} of its lines hold a cue word")
    print(
        f"  grep                   best {g_best:6.2f} s ({mb / g_best:7.1f} MB/s)  median {g_med:6.2f} s  cpu {g_cpu:5.2f} s"
    )
    ok = True
    for engine in engines():
        rs = got[engine]
        best = min(w for w, _, _ in rs)
        med = statistics.median(w for w, _, _ in rs)
        cpu = min(c for _, c, _ in rs)
        rss = max(r for _, _, r in rs)
        rep = got["reports"][engine]
        root = rep.get("root_cause")
        print(
            f"  explain ({engine:9s})  best {best:6.2f} s ({mb / best:7.1f} MB/s)  median {med:6.2f} s  cpu {cpu:5.2f} s  "
            f"peak RSS {rss / 2**20:6.1f} MiB  root cause {root}"
        )
        print(
            f"    ratio to grep: {g_best / best:.2f}x best-to-best, {g_med / med:.2f}x median, {g_cpu / cpu:.2f}x by CPU time"
        )
        if engine == engines()[0]:
            ok = g_med / med >= 0.25 and rss < 200 * 2**20 and root == "diag.sigkill_oom"
    return ok


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--log", metavar="FILE", help="measure this existing log instead of the two generated ones")
    parser.add_argument(
        "--keep", metavar="DIR", help="write the generated logs (dense.log, sparse.log) here and keep them"
    )
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-explain-"))
    where = Path(args.keep) if args.keep else tmp
    where.mkdir(parents=True, exist_ok=True)
    load_before = load()
    logs = {"given": Path(args.log)} if args.log else {"dense": where / "dense.log", "sparse": where / "sparse.log"}
    ok = True
    try:
        results = {}
        for name, log in logs.items():
            if name == "dense" and not log.exists():
                generate_dense(log, args.size_mb)
            if name == "sparse" and not log.exists():
                generate_sparse(log, args.size_mb)
            results[name] = measure(log, args.runs, tmp)
        print(f"{args.runs} runs each, alternately; load average before: {load_before}")
        print(f"yardstick: grep -ciE '{'|'.join(cues())}' FILE > out.txt")
        for name, log in logs.items():
            ok = report(name, log, results[name]) and ok
    finally:
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()
    print(f"load average after: {load()}")
    print(
        "targets (median ratio >= 0.25x grep on each log, < 200 MiB peak RSS, root cause diag.sigkill_oom):",
        "MET" if ok else "MISSED",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
