"""The cluster file of a multi-node check: what every rank tells node 0, gathered by rank 0.

Each rank builds its ClusterEntry (who it is, its result, versions, NCCL transports, the cross-node
probes) and puts it into the c10d store; rank 0 collects them into one ClusterFile for its node's
parent (live/multinode/rankside.py writes both). The parent reads the file back (live/multinode/
node.py, cluster.py). Like the rank files it carries `schema`: a file or an entry that is cut short,
foreign or of another version is a RecordError naming it, never a half-read record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, cast

from ddp_doctor.rundir.records import NONE, NUMBER, SCHEMA, RankResult, RecordError, json_object, take


class Versions(TypedDict):
    """What a node runs, compared across nodes (multinode.versions)."""

    torch: str
    cuda: str | None
    nccl: str | None
    driver: str | None


class LinkFacts(TypedDict, total=False):
    """What a node's preflight found about the interface its ranks talk through (the parent passes it on)."""

    interface: str | None
    address: str | None
    variable: str | None
    value: str | None


class NcclLogInfo(TypedDict, total=False):
    """What one process's NCCL_DEBUG=INFO log says it used (live/nccl_log.py reads it)."""

    version: str | None
    ib_devices: str | None
    """The InfiniBand devices NCCL chose; "" when it found none."""
    socket_interfaces: str | None
    transports: dict[str, int]
    """Transport family (P2P, SHM, NET/IB, NET/Socket) -> channels that used it."""


class ClockOffset(TypedDict):
    """A node leader's clock against rank 0's, from the best of a few round trips."""

    offset_s: float
    rtt_ms: float


def _mapping(data: Mapping[str, Any], name: str, what: str) -> Mapping[str, Any] | None:
    value = take(data, name, (dict, NONE), what, None)
    return cast("Mapping[str, Any] | None", value)


@dataclass(frozen=True)
class ClusterEntry:
    """One rank's entry: who it is, what it reported, and what its cross-node probes measured."""

    rank: int
    node_rank: int
    hostname: str | None = None
    node: str | None = None
    """The node's name as its parent named it."""
    local_rank: int | None = None
    group_rank: int | None = None
    preflight: LinkFacts = field(default_factory=lambda: LinkFacts())
    result: RankResult | None = None
    """The rank's own result (its rank-N.json), for node 0's merge of every rank."""
    result_error: str | None = None
    """Why the result that came was no record (RecordError's line); the rest of the entry still counts."""
    versions: Versions | None = None
    nccl: NcclLogInfo | None = None
    clock: ClockOffset | None = None
    """Node leaders only."""
    bandwidth_gbps: Mapping[str, float] = field(default_factory=dict)
    """Rank 0 only: "intra" and "inter:N" (node 0 <-> node N) point-to-point bandwidth."""
    probes_skipped: str | None = None
    time: float | None = None
    cluster_probe_s: float | None = None
    """What the cross-node probes took on this rank."""
    error: str | None = None
    """Why this rank's cluster step broke, when it did."""

    @property
    def label(self) -> str:
        return f"node {self.node_rank} ({self.hostname or self.node})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rank": self.rank,
            "node_rank": self.node_rank,
            "hostname": self.hostname,
            "node": self.node,
            "local_rank": self.local_rank,
            "group_rank": self.group_rank,
            "preflight": dict(self.preflight),
            "payload": self.result.payload() if self.result is not None else None,
            "versions": self.versions,
            "nccl": self.nccl,
            "clock": self.clock,
            "bandwidth_gbps": dict(self.bandwidth_gbps),
        }
        rest = ("probes_skipped", "time", "cluster_probe_s", "error")  # result_error: the reader's, never written
        return out | {k: getattr(self, k) for k in rest if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str) -> ClusterEntry:
        what = f"{what} entry of rank {data.get('rank')!r}"
        payload = _mapping(data, "payload", what)
        bandwidth = _mapping(data, "bandwidth_gbps", what) or {}
        if not all(isinstance(v, NUMBER) and not isinstance(v, bool) for v in bandwidth.values()):
            raise RecordError(f"{what} field 'bandwidth_gbps' is {dict(bandwidth)!r}, not numbers")
        clock = _mapping(data, "clock", what)
        if clock is not None:
            take(clock, "offset_s", NUMBER, f"{what} clock")
        result, result_error = None, None
        if payload is not None:
            try:
                node = data.get("node") or data.get("hostname")
                result = RankResult.from_dict({"node": node, **payload}, f"rank {data.get('rank')}'s result")
            except RecordError as exc:
                result_error = str(exc)
        return cls(
            rank=take(data, "rank", (int,), what),
            node_rank=take(data, "node_rank", (int,), what, 0),
            hostname=take(data, "hostname", (str, NONE), what, None),
            node=take(data, "node", (str, NONE), what, None),
            local_rank=take(data, "local_rank", (int, NONE), what, None),
            group_rank=take(data, "group_rank", (int, NONE), what, None),
            preflight=cast(LinkFacts, dict(_mapping(data, "preflight", what) or {})),
            result=result,
            result_error=result_error,
            versions=cast("Versions | None", _mapping(data, "versions", what)),
            nccl=cast("NcclLogInfo | None", _mapping(data, "nccl", what)),
            clock=cast("ClockOffset | None", clock),
            bandwidth_gbps={k: float(v) for k, v in bandwidth.items()},
            probes_skipped=take(data, "probes_skipped", (str, NONE), what, None),
            time=take(data, "time", (*NUMBER, NONE), what, None),
            cluster_probe_s=take(data, "cluster_probe_s", (*NUMBER, NONE), what, None),
            error=take(data, "error", (str, NONE), what, None),
        )


@dataclass(frozen=True)
class ClusterFile:
    """Every rank's entry as rank 0 gathered them, and the ranks it waited for in vain."""

    world_size: int
    ranks: Mapping[int, ClusterEntry]
    """rank -> its entry, in rank order."""
    missing: tuple[int, ...] = ()
    """Ranks whose entry did not come within gather_timeout_s."""
    gather_timeout_s: float | None = None
    collected_at: float | None = None
    error: str | None = None
    """Why rank 0's gather itself broke, when it did."""

    def to_json(self) -> str:
        data = {
            "schema": SCHEMA,
            "world_size": self.world_size,
            "ranks": {str(r): e.to_dict() for r, e in sorted(self.ranks.items())},
            "missing": list(self.missing),
            "gather_timeout_s": self.gather_timeout_s,
            "collected_at": self.collected_at,
            "error": self.error,
        }
        # default=str: a probe may hold a value JSON has no type for; its text is enough.
        return json.dumps(data, default=str)

    @classmethod
    def from_json(cls, text: str, what: str = "the cluster file") -> ClusterFile:
        return cls.from_dict(json_object(text, what), what)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str = "the cluster file") -> ClusterFile:
        ranks = _mapping(data, "ranks", what) or {}
        if not all(k.isdigit() and isinstance(v, Mapping) for k, v in ranks.items()):
            raise RecordError(f"{what} field 'ranks' holds an entry that is not a rank's object")
        missing = take(data, "missing", (list, tuple), what, [])
        if not all(isinstance(m, int) and not isinstance(m, bool) for m in missing):
            raise RecordError(f"{what} field 'missing' is {missing!r}, not a list of ranks")
        return cls(
            world_size=take(data, "world_size", (int,), what),
            ranks={
                int(k): ClusterEntry.from_dict(v, what) for k, v in sorted(ranks.items(), key=lambda kv: int(kv[0]))
            },
            missing=tuple(missing),
            gather_timeout_s=take(data, "gather_timeout_s", (*NUMBER, NONE), what, None),
            collected_at=take(data, "collected_at", (*NUMBER, NONE), what, None),
            error=take(data, "error", (str, NONE), what, None),
        )
