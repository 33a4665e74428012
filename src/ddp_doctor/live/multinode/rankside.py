"""Inside a rank of a multi-node run: cross-node probes, then every rank's payload to rank 0.

Called by the worker at the end of its phases (`finish(payload)`), on every rank:

1. probes (only when the process group is up on every rank): versions of torch / CUDA / NCCL /
   the driver, this node's clock against rank 0's (NTP-style ping-pong over send/recv), and
   point-to-point bandwidth with the backend in use, once between two ranks of node 0
   (intra-node) and once between node 0 and each other node (inter-node);
2. the gather: each rank puts its payload into the c10d store under a private prefix (a plain
   `set`: it needs no other rank, so a failed rank still reports); the collector (local rank 0
   of node 0) waits for all of them within a bounded time and writes them to
   $DDP_DOCTOR_CLUSTER_FILE, which the parent on node 0 turns into the cluster report.

Test-only fault switch: DDP_DOCTOR_TEST_CLOCK_OFFSET_S=<seconds> adds that offset to this
node's clock readings (namespaces share one kernel clock, so real skew cannot be made there).
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from ddp_doctor.live import nccl_log
from ddp_doctor.rundir import jsonfile, layout, writer
from ddp_doctor.rundir.cluster import ClockOffset, ClusterEntry, ClusterFile, NcclLogInfo, Versions
from ddp_doctor.rundir.records import RankResult

CLUSTER_FILE_ENV = "DDP_DOCTOR_CLUSTER_FILE"
"""Set by the parent on every node of a multi-node run; the collector writes the gathered entries there."""
PREFIX = "ddp_doctor/gather"
GATHER_TIMEOUT_S = float(os.environ.get("DDP_DOCTOR_GATHER_TIMEOUT_S", "15"))
BANDWIDTH_BYTES = 4 << 20
BANDWIDTH_ITERS = 3
CLOCK_ROUNDS = 5


def _now() -> float:
    return time.time() + float(os.environ.get("DDP_DOCTOR_TEST_CLOCK_OFFSET_S", "0") or 0)


def node_rank() -> int:
    """The user's --node-rank when given; c10d's own group rank otherwise (it sorts nodes by name)."""
    return int(os.environ.get("DDP_DOCTOR_NODE_RANK") or os.environ.get("GROUP_RANK") or 0)


def is_collector() -> bool:
    """Local rank 0 of node 0: the node where the user reads the cluster report (c10d may give
    global rank 0 to another node, since it orders nodes by host name)."""
    if os.environ.get("LOCAL_RANK", "0") != "0":
        return False
    given = os.environ.get("DDP_DOCTOR_NODE_RANK")
    return given == "0" if given else os.environ.get("RANK", "0") == "0"


def versions() -> Versions:
    import torch

    found = Versions(torch=torch.__version__, cuda=torch.version.cuda, nccl=None, driver=None)
    try:
        if torch.cuda.is_available():
            found["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001 - a torch without NCCL simply has none
        found["nccl"] = None
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            found["driver"] = str(pynvml.nvmlSystemGetDriverVersion())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML: no driver to compare (CPU node)
        found["driver"] = None
    return found


def _layout() -> tuple[int, int]:
    """(local world size, number of nodes), as torchrun set them."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return local, max(1, world // max(1, local))


def _clock_offset(peer: int, me: int) -> ClockOffset | None:
    """Rank 0 <-> a node leader: offset of the leader's clock from rank 0's, best of a few round trips."""
    import torch
    import torch.distributed as dist

    best: tuple[float, float] | None = None
    buf = torch.zeros(1, dtype=torch.float64)
    for _ in range(CLOCK_ROUNDS):
        if me == 0:
            dist.recv(buf, src=peer)
            buf.fill_(_now())
            dist.send(buf, dst=peer)
        else:
            t0 = _now()
            buf.fill_(t0)
            dist.send(buf, dst=0)
            dist.recv(buf, src=0)
            t1 = _now()
            rtt, offset = t1 - t0, (t0 + t1) / 2 - float(buf.item())
            if best is None or rtt < best[0]:
                best = (rtt, offset)
    if best is None:
        return None
    return ClockOffset(offset_s=round(best[1], 6), rtt_ms=round(best[0] * 1000, 3))


def _pingpong(a: int, b: int, me: int) -> float | None:
    """Bandwidth between ranks a and b in GB/s (bytes moved each way / time), measured on a."""
    import torch
    import torch.distributed as dist

    buf = torch.ones(BANDWIDTH_BYTES // 4, dtype=torch.float32)
    if torch.cuda.is_available() and dist.get_backend() == "nccl":
        buf = buf.cuda()
    peer = b if me == a else a
    elapsed = []
    for i in range(BANDWIDTH_ITERS + 1):
        start = time.perf_counter()
        if me == a:
            dist.send(buf, dst=peer)
            dist.recv(buf, src=peer)
        else:
            dist.recv(buf, src=peer)
            dist.send(buf, dst=peer)
        if buf.is_cuda:
            torch.cuda.synchronize()
        if i:  # the first round pays for connection setup
            elapsed.append(time.perf_counter() - start)
    if me != a:
        return None
    return round(2 * BANDWIDTH_BYTES / min(elapsed) / 1e9, 3)


def probes(entry: ClusterEntry) -> ClusterEntry:
    """The entry with what the cross-node probes measured on this rank: the clock offset (node leaders) and
    point-to-point bandwidth (rank 0). Run on every rank in the same order; each pair talks only to itself."""
    import torch.distributed as dist

    me = dist.get_rank()
    local, nnodes = _layout()
    clock = None
    dist.barrier()
    for n in range(1, nnodes):  # each node's leader against rank 0
        leader = n * local
        if me in (0, leader):
            offset = _clock_offset(leader if me == 0 else 0, me)
            if me == leader and offset:
                clock = offset
    pairs: list[tuple[str, int, int]] = []
    if local >= 2:
        pairs.append(("intra", 0, 1))
    pairs += [(f"inter:{n}", 0, n * local) for n in range(1, nnodes)]
    bandwidth: dict[str, float] = {}
    for name, a, b in pairs:
        dist.barrier()
        if me in (a, b):
            gbps = _pingpong(a, b, me)
            if gbps is not None:
                bandwidth[name] = gbps
    dist.barrier()
    return replace(entry, clock=clock, bandwidth_gbps=bandwidth)


def _store() -> Any:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        base = dist.distributed_c10d._get_default_store()
    else:  # init failed on this rank: reach torchrun's store directly, so the rank still reports
        base = dist.TCPStore(  # type: ignore[attr-defined]
            os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timedelta(seconds=5)
        )
    run = os.environ.get("TORCHELASTIC_RUN_ID", "run")
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"{PREFIX}/{run}/{restart}/", base)  # type: ignore[attr-defined]


def nccl_transports() -> NcclLogInfo | None:
    """What NCCL_DEBUG=INFO (written to {run_dir}/nccl.<pid>.log by the chain) says this rank used."""
    try:
        lines = (writer.run_dir() / f"nccl.{os.getpid()}.log").read_text(errors="replace").splitlines()
    except OSError:
        return None
    return nccl_log.parse(lines)


def identity(result: RankResult) -> ClusterEntry:
    """Who this rank is, at the head of its entry, with its own result."""
    return ClusterEntry(
        rank=int(os.environ.get("RANK", "0")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        node_rank=node_rank(),
        group_rank=int(os.environ.get("GROUP_RANK", "0")),
        hostname=socket.gethostname(),
        node=os.environ.get(layout.NODE_ENV) or socket.gethostname(),
        preflight=json.loads(os.environ.get("DDP_DOCTOR_MULTINODE_PREFLIGHT") or "{}"),
        result=result,
    )


def _wait_keys(store: Any, keys: list[str], until: float) -> list[str]:
    """The keys still missing at `until` (epoch seconds); polls, since a store wait cannot be cut short."""
    missing = list(keys)
    while missing:
        missing = [k for k in missing if not store.check([k])]
        if not missing or time.time() >= until:
            break
        time.sleep(0.1)
    return missing


def finish(result: RankResult, group_ok: bool, deadline: float) -> None:
    """The last step of a rank in a multi-node run; never raises (the rank's own result is already written).

    `deadline` (epoch seconds) bounds everything here, the probes included.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    me = int(os.environ.get("RANK", "0"))
    entry = identity(replace(result, finished=True))
    store = None
    try:
        writer.heartbeat("cluster", step="agree")
        store = _store()
        entry = _probe(entry, store, group_ok, world, deadline)
    except Exception as exc:  # noqa: BLE001 - reported to node 0, not raised
        entry = replace(entry, error=f"{type(exc).__name__}: {exc}")
    try:
        writer.heartbeat("cluster", step="gather")
        store = store or _store()
        store.set(f"rank/{me}", json.dumps(entry.to_dict(), default=str))
        if is_collector():
            _collect(store, world, entry, me, deadline)
    except Exception as exc:  # noqa: BLE001
        if is_collector():
            missing = tuple(r for r in range(world) if r != me)
            _write(ClusterFile(world, {me: entry}, missing, error=f"{type(exc).__name__}: {exc}"))


def _probe(entry: ClusterEntry, store: Any, group_ok: bool, world: int, deadline: float) -> ClusterEntry:
    """The entry with this rank's versions and NCCL transports, and the probes when every rank is ready."""
    import torch.distributed as dist

    started = time.monotonic()
    group_ok = group_ok and dist.is_initialized()
    store.set(f"ok/{entry.rank}", "1" if group_ok else "0")
    # Probes need every rank: run them only when every rank says its group is healthy.
    late = _wait_keys(store, [f"ok/{r}" for r in range(world)], min(time.time() + 10.0, deadline - 2.0))
    everyone = not late and all(store.get(f"ok/{r}") == b"1" for r in range(world))
    entry = replace(entry, versions=versions(), nccl=nccl_transports())
    if everyone:
        writer.heartbeat("cluster", step="probes")
        entry = probes(entry)
    else:
        entry = replace(entry, probes_skipped=f"ranks not ready: {late}" if late else "a rank's process group failed")
    return replace(entry, time=_now(), cluster_probe_s=round(time.monotonic() - started, 3))


def _write(gathered: ClusterFile) -> None:
    target = os.environ.get(CLUSTER_FILE_ENV)
    if target:
        jsonfile.write_atomic(Path(target), gathered.to_json())


def _collect(store: Any, world: int, mine: ClusterEntry, me: int, deadline: float) -> None:
    until = min(time.time() + GATHER_TIMEOUT_S, deadline)
    missing = _wait_keys(store, [f"rank/{r}" for r in range(world) if r != me], until)
    ranks = {me: mine}
    for r in range(world):
        if r != me and f"rank/{r}" not in missing:
            ranks[r] = ClusterEntry.from_dict(json.loads(store.get(f"rank/{r}")), f"rank {r}'s")
    _write(
        ClusterFile(
            world_size=world,
            ranks=dict(sorted(ranks.items())),
            missing=tuple(int(k.split("/")[1]) for k in missing),
            gather_timeout_s=GATHER_TIMEOUT_S,
            collected_at=_now(),
        )
    )


def _main() -> int:
    """Standalone entry (`torchrun -m ddp_doctor.live.multinode.rankside`): init, probes, gather."""
    import torch.distributed as dist

    backend = os.environ.get("DDP_DOCTOR_BACKEND", "gloo")
    body: dict[str, object] = {"started": time.time()}
    ok = True
    try:
        writer.heartbeat("init")
        dist.init_process_group(backend, timeout=timedelta(seconds=30))
    except Exception as exc:  # noqa: BLE001
        ok = False
        body["error"] = f"{type(exc).__name__}: {exc}"
    result = RankResult(rank=int(os.environ.get("RANK", "0")), pid=os.getpid(), finished=True, body=body)
    writer.write_result(result)
    finish(result, ok, time.time() + 40)
    if ok:
        dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(_main())
