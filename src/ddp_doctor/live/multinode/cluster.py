"""Node 0's view of the whole cluster: who joined, and the checks that need every node.

Inputs are plain data: `cluster.json` written by rank 0 (see rankside.py: one entry per rank
with its payload, versions, clock offset, bandwidth, preflight facts) and what the parent saw
of the c10d store's TCP connections while torchrun ran (`StoreWatch`). No torch import.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
import statistics
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TypedDict

from ddp_doctor import words
from ddp_doctor.live import procnet
from ddp_doctor.live.multinode import preflight
from ddp_doctor.report import Result, Status
from ddp_doctor.rundir.cluster import ClusterEntry, ClusterFile, NcclLogInfo

CLOCK_SKEW_WARN_S = 1.0
"""Log lines of different nodes interleave wrongly beyond about a second (log stamps are per second or ms)."""
SLOW_LINK_RATIO = 0.5
"""An inter-node link slower than half the median inter-node link is a slow link."""
VERSION_KEYS = ("torch", "cuda", "nccl", "driver")


def expected_nodes(nnodes: str) -> tuple[int, int]:
    """(min, max) from `N` or `MIN:MAX`."""
    lo, _, hi = nnodes.partition(":")
    return int(lo), int(hi or lo)


# -- who is connected to the rendezvous store ----------------------------------------------


def store_peers(port: int) -> set[str]:
    """Remote addresses with an ESTABLISHED TCP connection to local `port` in this network namespace."""
    return {s.remote_addr for s in procnet.tcp_sockets() if s.state == procnet.ESTABLISHED and s.local_port == port}


class StoreWatch:
    """While torchrun runs on node 0, remember every address that connected to the c10d store.

    Each node's agent holds a connection to the store for the whole rendezvous, so the distinct
    addresses are the nodes that joined, even when the rendezvous never completes.
    """

    def __init__(self, port: int, interval_s: float = 0.25) -> None:
        self.port = port
        self.interval_s = interval_s
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ddp-doctor-store-watch", daemon=True)

    def __enter__(self) -> StoreWatch:  # noqa: PYI034 - py3.10 has no typing.Self
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * self.interval_s + 1)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for peer in store_peers(self.port):
                self.seen.setdefault(peer, time.time())
            self._stop.wait(self.interval_s)


def reachable(address: str, port: int, timeout_s: float = 2.0) -> bool:
    """A TCP connect that is accepted or refused proves the path; a timeout or no route does not."""
    return preflight.connect_errno(address, port, timeout_s) in (0, errno.ECONNREFUSED)


# -- the checks ---------------------------------------------------------------------------


def _by_node(ranks: Mapping[int, ClusterEntry]) -> dict[int, list[ClusterEntry]]:
    nodes: dict[int, list[ClusterEntry]] = {}
    for entry in ranks.values():
        nodes.setdefault(entry.node_rank, []).append(entry)
    return dict(sorted(nodes.items()))


def joined(
    nnodes: str,
    cluster: ClusterFile | None,
    seen_peers: Iterable[str],
    join_timeout_s: float | None,
    rendezvous_error: str | None,
) -> Result:
    lo, hi = expected_nodes(nnodes)
    peers = sorted(set(seen_peers))
    nodes = _by_node(cluster.ranks) if cluster else {}
    count = len(nodes) if nodes else len(peers)
    observed: dict[str, object] = {"nodes_joined": count, "store_peers": peers, "nnodes": nnodes}
    if nodes:
        observed["nodes"] = {str(n): entries[0].hostname for n, entries in nodes.items()}
    want = f"{hi}" if lo == hi else f"{lo} to {hi}"
    title = "nodes joined the rendezvous"
    if (nodes and count >= lo) or (not rendezvous_error and count >= lo):
        return Result(
            "multinode.joined",
            title,
            Status.PASS,
            f"{count} of {words.count(want, 'node')} joined",
            observed=observed,
            metrics={"nodes": count},
        )
    timeout = f" within the join timeout ({join_timeout_s:.0f} s)" if join_timeout_s else ""
    return Result(
        "multinode.joined",
        title,
        Status.FAIL,
        f"{count} of {words.count(want, 'node')} joined{timeout}"
        + (f"; connected to the store: {', '.join(peers)}" if peers else ""),
        cause=rendezvous_error or "the rendezvous did not complete",
        remedy="start `ddp-doctor check` with the same --nnodes/--rdzv-endpoint/--rdzv-id on every node; on a "
        "missing node, its own report (preflight) says why it could not join",
        observed=observed,
        expected={"nodes": hi},
        metrics={"nodes": count},
        phase="rendezvous",
        started=time.time(),
    )


def missing_ranks(cluster: ClusterFile) -> Result | None:
    missing = list(cluster.missing)
    if not missing:
        return None
    world = cluster.world_size
    return Result(
        "multinode.ranks_reported",
        "every rank reported to node 0",
        Status.FAIL,
        f"{world - len(missing)} of {words.count(world, 'rank')} reported to rank 0 "
        f"within {cluster.gather_timeout_s if cluster.gather_timeout_s is not None else '?'} s; "
        f"silent: rank {', '.join(map(str, missing))}",
        cause="those ranks died, hung, or lost their network path to node 0 before the end of the run",
        remedy="read the local report of the node that ran them; it names the phase each rank reached",
        observed={"missing": missing, "error": cluster.error},
        expected={"missing": []},
        phase="gather",
        started=time.time(),
    )


def versions(cluster: ClusterFile) -> Result:
    nodes = _by_node(cluster.ranks)
    per_node: dict[int, Mapping[str, object]] = {n: dict(entries[0].versions or {}) for n, entries in nodes.items()}
    labels = {n: entries[0].label for n, entries in nodes.items()}
    differ: dict[str, dict[str, object]] = {}  # version key -> node -> that node's version
    for key in VERSION_KEYS:
        values = {labels[n]: v.get(key) for n, v in per_node.items()}
        if len(set(values.values())) > 1:
            differ[key] = values
    observed = {"per_node": {labels[n]: v for n, v in per_node.items()}}
    if not differ:
        first = next(iter(per_node.values()), {})
        same = ", ".join(f"{k} {first.get(k)}" for k in VERSION_KEYS if first.get(k))
        return Result(
            "multinode.versions",
            "same versions on every node",
            Status.PASS,
            f"{words.plural(len(nodes), 'node')} run the same {same or 'versions'}",
            observed=observed,
        )
    detail = "; ".join(f"{k}: " + ", ".join(f"{node} {v}" for node, v in vals.items()) for k, vals in differ.items())
    return Result(
        "multinode.versions",
        "same versions on every node",
        Status.FAIL,
        f"versions differ between nodes: {detail}",
        cause="ranks built against different torch / CUDA / NCCL or drivers can disagree on collective protocols "
        "and fail or corrupt results in ways that look like network errors",
        remedy="run one image (or one locked environment) on every node; upgrade the odd node out",
        observed={**observed, "differ": differ},
        expected={"identical": list(differ)},
        started=time.time(),
    )


def bandwidth(cluster: ClusterFile, backend: str) -> Result | None:
    measured: dict[str, float] = {}
    for entry in cluster.ranks.values():
        measured.update(entry.bandwidth_gbps)
    if not measured:
        return None
    inter = {k: v for k, v in measured.items() if k.startswith("inter:")}
    intra = measured.get("intra")
    metrics: dict[str, float] = {f"inter_node{k.split(':')[1]}_gbps": v for k, v in inter.items()}
    if inter:
        metrics["inter_min_gbps"] = min(inter.values())
    if intra is not None:
        metrics["intra_gbps"] = intra
    if intra and inter:
        metrics["inter_to_intra_ratio"] = round(min(inter.values()) / intra, 3)
    text = ", ".join(f"node 0<->{k.split(':')[1]} {v:.2f} GB/s" for k, v in sorted(inter.items()))
    summary = f"{backend} point-to-point: inter-node {text or 'not measured'}" + (
        f"; intra-node (node 0) {intra:.2f} GB/s" if intra is not None else ""
    )
    median = statistics.median(inter.values()) if inter else 0.0
    slow = sorted(k.split(":")[1] for k, v in inter.items() if len(inter) > 1 and v < SLOW_LINK_RATIO * median)
    if slow:
        return Result(
            "multinode.bandwidth",
            "inter-node bandwidth",
            Status.WARN,
            summary + f"; node {', '.join(slow)} below {SLOW_LINK_RATIO:.0%} of the median inter-node link",
            cause="one slow link sets the pace of every collective of the job",
            remedy="check that node's NIC speed (`ethtool`), the interface in use and the switch port",
            metrics=metrics,
            observed={"slow_nodes": slow},
        )
    probe_s = [e.cluster_probe_s for e in cluster.ranks.values() if e.cluster_probe_s is not None]
    if probe_s:
        metrics["cluster_probe_max_s"] = max(probe_s)  # what the cross-node probes added to the run
    return Result(
        "multinode.bandwidth",
        "inter-node bandwidth",
        Status.PASS,
        summary,
        metrics=metrics,
        observed={"message_bytes": 4 << 20},
    )


class NodeLink(TypedDict):
    """How one node's ranks reached the others (observed["per_node"] of multinode.interfaces)."""

    interface: str | None
    address: str | None
    transport: str | None


def interfaces(cluster: ClusterFile, backend: str) -> Result:
    per_node: dict[str, NodeLink] = {}
    for entries in _by_node(cluster.ranks).values():
        pre = entries[0].preflight
        nccl = [e.nccl or NcclLogInfo() for e in entries]
        transports = sorted({t for info in nccl for t in (info.get("transports") or {})})
        sockets = next((info.get("socket_interfaces") for info in nccl if info.get("socket_interfaces")), None)
        per_node[entries[0].label] = NodeLink(
            interface=pre.get("interface") or sockets,
            address=pre.get("address"),
            transport=", ".join(transports) if transports else ("TCP (gloo)" if backend == "gloo" else None),
        )
    text = "; ".join(
        f"{node}: {v['interface'] or '?'} {v['address'] or ''} {v['transport'] or ''}".strip()
        for node, v in per_node.items()
    )
    return Result(
        "multinode.interfaces",
        "interface and transport of each node",
        Status.PASS,
        text,
        observed={"per_node": per_node},
    )


def clock_skew(cluster: ClusterFile) -> Result | None:
    offsets = {e.label: float(e.clock["offset_s"]) for e in cluster.ranks.values() if e.clock}
    if not offsets:
        return None
    worst_node, worst = max(offsets.items(), key=lambda kv: abs(kv[1]))
    metrics = {"max_clock_skew_s": round(abs(worst), 6)}
    if abs(worst) > CLOCK_SKEW_WARN_S:
        return Result(
            "multinode.clock_skew",
            "clocks agree across nodes",
            Status.WARN,
            f"{worst_node}'s clock is {worst:+.3f} s from node 0's (more than {CLOCK_SKEW_WARN_S:.0f} s)",
            cause="timestamps in the logs of different nodes will not line up, which misleads the reading of "
            "which node failed first",
            remedy="run NTP/chrony on every node (`chronyc tracking` shows the offset)",
            observed={"offset_s": offsets},
            expected={"max_abs_offset_s": CLOCK_SKEW_WARN_S},
            metrics=metrics,
        )
    return Result(
        "multinode.clock_skew",
        "clocks agree across nodes",
        Status.PASS,
        f"largest offset from node 0: {abs(worst) * 1000:.1f} ms ({worst_node})",
        observed={"offset_s": offsets},
        metrics=metrics,
    )


def lost_peers(peers: Iterable[str], port: int, local: Iterable[str]) -> Result | None:
    """After a failed run on node 0: which nodes that had joined no longer answer at all."""
    mine = set(local)
    gone = [
        p
        for p in sorted(set(peers))
        if p not in mine and not ipaddress.ip_address(p).is_loopback and not reachable(p, port)
    ]
    if not gone:
        return None
    return link_lost(
        f"{', '.join(node_words(a) for a in gone)} joined the rendezvous but no longer answers from node 0",
        "that node",
        "check that node's link and its own report; collectives then wait until the process-group timeout",
        unreachable=gone,
    )


# A rank's transport error that names the peer it lost, as gloo and NCCL print it:
#   gloo  pair.cc: "Read error [10.0.0.2]:18621: Connection reset by peer", "Connection closed by peer [10.0.0.2]:63141"
#   NCCL  socket.cc: "Connection closed by remote peer 10.0.0.2<43125>"
# Sources: pytorch/gloo gloo/transport/tcp/pair.cc; NVIDIA/nccl src/misc/socket.cc.
_PEER_ERROR = re.compile(
    r"(?:(?:Read|Write) error|closed by (?:remote )?peer|reset by peer)\s*\[?(\d{1,3}(?:\.\d{1,3}){3})\]?(?::|<)\d+"
)
_NAME_LOOKUP_S = 2.0


def peers_in_errors(lines: Iterable[str]) -> list[str]:
    """The peer addresses this node's ranks lost a connection to, in order of first mention."""
    found: list[str] = []
    for line in lines:
        for address in _PEER_ERROR.findall(line):
            if address not in found:
                found.append(address)
    return found


def host_name(address: str, timeout_s: float = _NAME_LOOKUP_S) -> str | None:
    """The node's name for an address (/etc/hosts or reverse DNS), or None; never longer than timeout_s."""
    names: list[str] = []

    def lookup() -> None:
        try:
            names.append(socket.gethostbyaddr(address)[0].split(".")[0])
        except (OSError, UnicodeError):
            pass

    worker = threading.Thread(target=lookup, name="ddp-doctor-host-name", daemon=True)
    worker.start()
    worker.join(timeout_s)
    return names[0] if names else None


def node_words(address: str) -> str:
    """'node1 (10.0.0.2)', or the address alone when it has no name."""
    name = host_name(address)
    return f"{name} ({address})" if name and name != address else address


def peer_failed(lost: list[str], phase: str | None) -> Result:
    """Node 0's ranks lost their connections to ranks on other nodes: the failure began there."""
    nodes = [node_words(a) for a in lost]
    where = " in " + phase if phase else ""
    return Result(
        "multinode.peer_failed",
        "ranks on the other nodes",
        Status.FAIL,
        f"this node's ranks lost their connection to {', '.join(nodes)}{where}: a rank there ended first",
        cause="a rank on another node exited, was killed or its node went down while the ranks here were "
        "talking to it; the ranks here failed as a consequence",
        remedy=f"read the report of ddp-doctor check on {', '.join(nodes)}: it names the rank and why it ended",
        observed={"peers": lost, "nodes": nodes},
        phase="network",
        started=time.time(),
    )


def link_lost(
    summary: str, lost: str, remedy: str, *, unreachable: list[str] | None = None, endpoint: str = ""
) -> Result:
    """multinode.link_lost, as seen from node 0 (the `unreachable` nodes vanished) or from another node (node 0
    at `endpoint` vanished)."""
    seen_from_node0 = unreachable is not None
    observed: dict[str, object] = {"unreachable": unreachable} if seen_from_node0 else {"endpoint": endpoint}
    expected: dict[str, object] = {"unreachable": []} if seen_from_node0 else {"reachable": True}
    return Result(
        "multinode.link_lost",
        "network path to every node",
        Status.FAIL,
        summary,
        cause=f"the network path to {lost} was lost during the run (link down, node down, or a firewall change)",
        remedy=remedy,
        observed=observed,
        expected=expected,
        phase="network",
        started=time.time(),
    )


def evaluate(cluster: ClusterFile, backend: str) -> list[Result]:
    """The cross-node checks over rank 0's gathered entries."""
    found: list[Result | None] = [
        missing_ranks(cluster),
        versions(cluster),
        bandwidth(cluster, backend),
        interfaces(cluster, backend),
        clock_skew(cluster),
    ]
    errors = [f"rank {r}: {e.error}" for r, e in cluster.ranks.items() if e.error]
    if errors:
        found.append(
            Result(
                "multinode.probes",
                "cross-node probes",
                Status.ERROR,
                "the cross-node probes broke on " + "; ".join(errors),
                observed={"errors": errors},
            )
        )
    return [r for r in found if r is not None]
