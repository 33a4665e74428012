"""Time to a verdict of `ddp-doctor check` on 2 and 3 namespace-nodes against one node.

Each "node" is a network namespace on a private bridge (tests/multinode/netns.py); every node
runs `ddp-doctor check --backend gloo --nproc 1` through torchrun's c10d rendezvous, the
yardstick is the same check on one node (`--standalone`), in the same script. The time of a
multi-node run is until the last node has its verdict. Target: each added node adds < 20%.

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

COMMON = ["--backend", "gloo", "--nproc", "1", "--timeout", "120", "--dataloader-workers", "1", "--batch-mb", "1",
          "--format", "json"]
TARGET_PER_NODE = 0.20
verdicts: set[str] = set()


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.endswith("_SOCKET_IFNAME")} | {"NO_COLOR": "1"}


def run_nodes(n: int, out: Path) -> float:
    cluster = Cluster.create(n)
    try:
        port = random.randrange(30000, 40000)
        argvs = []
        for h in cluster.hosts:
            argv = [sys.executable, "-m", "ddp_doctor", "check", *COMMON, "--output", str(out / f"n{n}-{h.index}.json")]
            if n > 1:
                argv += ["--nnodes", str(n), "--node-rank", str(h.index), "--rdzv-endpoint", f"node0:{port}",
                         "--rdzv-id", f"bench-{port}", "--join-timeout", "60"]
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
        # A FAIL verdict still ran every phase (a failed check does not stop the chain); say which.
        for h, _ in argvs:
            report = json.loads((out / f"n{n}-{h.index}.json").read_text())
            if report["verdict"] == "fail":
                verdicts.add(f"{n} node(s), node {h.index}: fail, root cause {report['root_cause']}")
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
    for _ in range(args.repeat):
        for n, runs in times.items():  # interleaved, so drift of the machine hits every size alike
            runs.append(run_nodes(n, out))
    med = {n: statistics.median(t) for n, t in times.items()}
    print(f"cores: {os.cpu_count()}, repeats: {args.repeat} (median)")
    print(f"1 node  (yardstick): {med[1]:6.2f} s   runs: {', '.join(f'{t:.2f}' for t in times[1])}")
    ok = True
    for n in (2, 3):
        ratio = med[n] / med[1]
        per_node = (ratio - 1) / (n - 1)
        ok = ok and per_node < TARGET_PER_NODE
        print(f"{n} nodes: {med[n]:6.2f} s   ratio {ratio:.2f}x   +{per_node:.0%} per added node "
              f"(target < {TARGET_PER_NODE:.0%})   runs: {', '.join(f'{t:.2f}' for t in times[n])}")
    for line in sorted(verdicts):
        print(f"note: {line}")
    print("target met" if ok else "target NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
