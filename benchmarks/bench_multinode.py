"""Time to a verdict of `ddp-doctor check` on 2 and 3 namespace-nodes against one node.

Each "node" is a network namespace on a private bridge (tests/multinode/netns.py); every node
runs `ddp-doctor check --backend gloo --nproc 1` through torchrun's c10d rendezvous, the
yardstick is the same check on one node (`--standalone`), in the same script. The time of a
multi-node run is until the last node has its verdict. Target: each added node adds < 20%.
For context, the same node counts also run a bare torchrun job (one gloo all_reduce per
rank, same c10d rendezvous): what torchrun itself costs per added node on this machine.

    sudo .venv/bin/python benchmarks/bench_multinode.py [--repeat 3]

Needs root (namespaces). On a machine with few cores the nodes compete for the same CPUs
(each pays torch imports for its agent and its rank), which a real cluster does not: the
ratios here are an upper bound.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.multinode.netns import Cluster, available

COMMON = [
    "--backend",
    "gloo",
    "--nproc",
    "1",
    "--timeout",
    "120",
    "--dataloader-workers",
    "1",
    "--batch-mb",
    "1",
    "--format",
    "json",
]
TARGET_PER_NODE = 0.20
verdicts: set[str] = set()


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.endswith("_SOCKET_IFNAME")} | {"NO_COLOR": "1"}


BARE = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
assert t.item() == dist.get_world_size()
dist.destroy_process_group()
"""


def _torchrun() -> list[str]:
    beside = Path(sys.executable).with_name("torchrun")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "torch.distributed.run"]


def _bare_argv(n: int, index: int, port: int, script: Path) -> list[str]:
    """The yardstick job: torchrun with the same rendezvous, one gloo all_reduce per rank."""
    rdzv = (
        ["--standalone"]
        if n == 1
        else ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"node0:{port}", "--rdzv-id", f"bare-{port}"]
    )
    return [*_torchrun(), "--nnodes", str(n), "--nproc-per-node", "1", *rdzv, str(script)]


def run_nodes(n: int, out: Path, bare: bool = False) -> float:
    cluster = Cluster.create(n)
    script = out / "bare_allreduce.py"
    script.write_text(BARE)
    try:
        port = random.randrange(30000, 40000)
        argvs = []
        for h in cluster.hosts:
            if bare:
                argvs.append((h, _bare_argv(n, h.index, port, script)))
                continue
            argv = [sys.executable, "-m", "ddp_doctor", "check", *COMMON, "--output", str(out / f"n{n}-{h.index}.json")]
            if n > 1:
                argv += [
                    "--nnodes",
                    str(n),
                    "--node-rank",
                    str(h.index),
                    "--rdzv-endpoint",
                    f"node0:{port}",
                    "--rdzv-id",
                    f"bench-{port}",
                    "--join-timeout",
                    "60",
                ]
            argvs.append((h, argv))
        start = time.monotonic()
        procs = [cluster.popen(h, argv, env=_env()) for h, argv in argvs]
        codes = []
        for p in procs:
            _, err = p.communicate(timeout=180)
            codes.append(p.returncode)
            if p.returncode not in (0, 1):
                print(f"  node exited {p.returncode}: {err.strip()[-500:]}", file=sys.stderr)
        elapsed = time.monotonic() - start
        if any(code not in (0, 1) for code in codes):
            raise SystemExit(f"{n}-node check broke: exit codes {codes}")
        if bare:
            if any(codes):
                raise SystemExit(f"bare torchrun on {n} node(s) failed: exit codes {codes}")
            return elapsed
        # A FAIL verdict still ran every phase (a failed check does not stop the chain); say which.
        for h, _ in argvs:
            report = json.loads((out / f"n{n}-{h.index}.json").read_text())
            if report["verdict"] == "fail":
                root = next((r for r in report["results"] if r["id"] == report["root_cause"]), {})
                verdicts.add(
                    f"{n} node(s), node {h.index}: fail, root cause {report['root_cause']}: "
                    f"{str(root.get('summary'))[:300]}"
                )
        return elapsed
    finally:
        cluster.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="/tmp/ddp-doctor-bench-multinode")
    args = parser.parse_args()
    reason = available()
    if reason:
        print(f"bench_multinode: {reason}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    times: dict[int, list[float]] = {1: [], 2: [], 3: []}
    bare: dict[int, list[float]] = {1: [], 2: [], 3: []}
    for _ in range(args.repeat):
        for n, runs in times.items():  # interleaved, so drift of the machine hits every size alike
            runs.append(run_nodes(n, out))
            bare[n].append(run_nodes(n, out, bare=True))
    med = {n: statistics.median(t) for n, t in times.items()}
    bmed = {n: statistics.median(t) for n, t in bare.items()}
    print(f"cores: {os.cpu_count()}, repeats: {args.repeat} (median); every node runs on the same cores")
    print(f"1 node  (yardstick): doctor {med[1]:6.2f} s   bare torchrun all_reduce {bmed[1]:6.2f} s")
    ok = True
    for n in (2, 3):
        ratio = med[n] / med[1]
        per_node = (ratio - 1) / (n - 1)
        bratio = bmed[n] / bmed[1]
        ok = ok and per_node < TARGET_PER_NODE
        print(
            f"{n} nodes: doctor {med[n]:6.2f} s = {ratio:.2f}x of 1 node, +{per_node:.0%} per added node "
            f"(target < {TARGET_PER_NODE:.0%}); bare torchrun {bmed[n]:6.2f} s = {bratio:.2f}x, "
            f"+{(bratio - 1) / (n - 1):.0%} per added node; doctor/bare {med[n] / bmed[n]:.2f} "
            f"(1 node: {med[1] / bmed[1]:.2f})"
        )
        own = (med[n] / bmed[n]) / (med[1] / bmed[1]) - 1
        print(
            f"   the doctor's own cost beyond torchrun's: {own:+.0%} over {n - 1} added node(s) "
            f"({own / (n - 1):+.0%} per added node)"
        )
        print(
            f"   doctor runs: {', '.join(f'{t:.2f}' for t in times[n])}; bare: {', '.join(f'{t:.2f}' for t in bare[n])}"
        )
    for line in sorted(verdicts):
        print(f"note: {line}")
    print("target met" if ok else "target NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
