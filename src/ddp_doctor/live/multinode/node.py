"""One node of a multi-node `ddp-doctor check`: the stage around the live chain's launch.

The live chain (chain.py) stays the one place that launches; with several nodes its stage
(live/nodestage.py) is a NodePlan:

    stage = node.prepare(config, backend)     # flags checked, preflight run (one node: nodestage.OneNode)
    stage.blocked()                           # preflight FAIL: a clear report instead of a c10d timeout
    spec = stage.apply(spec)                  # rendezvous fields + env for the ranks
    with stage.watch():                       # node 0: who connects to the c10d store
        outcome = launch(spec)
    stage.adopt(outcome, merge_plan)          # node 0: every rank's payload; judge known ranks only
    ...the chain merges and judges the outcome...
    stage.conclude(results, root_cause, outcome)   # cluster checks, rendezvous failures, lost links

Every node writes its own report (its --output); node 0's carries the whole cluster.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypedDict

from ddp_doctor.checkconfig import CheckConfig
from ddp_doctor.errors import UsageError
from ddp_doctor.live.launch import RunOutcome, TorchrunSpec
from ddp_doctor.live.merge import Plan
from ddp_doctor.live.multinode import cluster, preflight
from ddp_doctor.live.multinode.rankside import CLUSTER_FILE_ENV
from ddp_doctor.live.nodestage import Conclusion
from ddp_doctor.report import Result, Status
from ddp_doctor.rundir import owner
from ddp_doctor.rundir.cluster import ClusterFile, LinkFacts
from ddp_doctor.rundir.records import RecordError

PREFLIGHT_ENV = "DDP_DOCTOR_MULTINODE_PREFLIGHT"
CLUSTER_DIR_PREFIX = "ddp-doctor-cluster-"
JOIN_SHARE = 1 / 3
"""Default --join-timeout: a third of --timeout (the rest is for the phases)."""
_RDZV_ERROR = re.compile(r"(Rendezvous\w*Error)(?::\s*(.*))?")
_RDZV_MEANING = {
    "RendezvousTimeoutError": "torchrun's rendezvous timed out before every node joined",
    "RendezvousClosedError": "the rendezvous was closed by another node (node 0 gave up waiting for a node, or a "
    "node failed and ended the run)",
    "RendezvousConnectionError": "torchrun could not connect to the c10d store at the rendezvous endpoint",
    "RendezvousStateError": "the rendezvous state in the c10d store is inconsistent (two runs share one --rdzv-id?)",
}


def _validate(config: CheckConfig) -> tuple[str, int, int]:
    nnodes = config.nnodes or "1"
    try:
        lo, hi = cluster.expected_nodes(nnodes)
    except ValueError:
        raise UsageError(f"--nnodes {nnodes!r}: expected N or MIN:MAX, e.g. 2 or 1:4") from None
    if lo < 1 or hi < lo:
        raise UsageError(f"--nnodes {nnodes!r}: expected 1 <= MIN <= MAX")
    if not config.rdzv_endpoint:
        raise UsageError(
            f"--nnodes {nnodes} needs --rdzv-endpoint HOST:PORT (node 0's address, the same on every node)"
        )
    if config.node_rank is not None and not 0 <= config.node_rank < hi:
        raise UsageError(f"--node-rank {config.node_rank} is outside 0..{hi - 1} for --nnodes {nnodes}")
    if config.node_rank is None and lo == hi:
        raise UsageError(f"--nnodes {nnodes} needs --node-rank R on every node (0 on the rendezvous host)")
    if config.master_port is not None:
        raise UsageError("--master-port is for one node; with --nnodes the port is the one in --rdzv-endpoint")
    return nnodes, lo, hi


class RendezvousFields(TypedDict):
    """A node's rendezvous: TorchrunSpec's fields of that name, and the report's `multinode` facts."""

    nnodes: str
    node_rank: int | None
    rdzv_endpoint: str
    rdzv_id: str
    join_timeout_s: float


@dataclass
class NodePlan:
    nnodes: str
    node_rank: int | None
    endpoint: preflight.Endpoint
    rdzv_id: str
    join_timeout_s: float
    backend: str
    preflight: list[Result]
    cluster_file: Path
    env: dict[str, str] = field(default_factory=dict)
    _watch: cluster.StoreWatch | None = None
    _gathered: ClusterFile | None = None
    _gather_unreadable: str | None = None

    def blocked(self) -> Conclusion | None:
        """The preflight failed: its results (the node's own evidence) instead of a launch."""
        if not any(r.status is Status.FAIL for r in self.preflight):
            return None
        with contextlib.suppress(OSError):
            self.cluster_file.parent.rmdir()
        facts = {**self.spec_fields(), "launched": False, "role": "local report"}
        return Conclusion(facts={"multinode": facts}, results=tuple(self.preflight))

    @property
    def is_node0(self) -> bool:
        return self.node_rank == 0

    def spec_fields(self) -> RendezvousFields:
        """The rendezvous fields of torchrun's spec, and of the report's `multinode` facts."""
        return RendezvousFields(
            nnodes=self.nnodes,
            node_rank=self.node_rank,
            rdzv_endpoint=str(self.endpoint),
            rdzv_id=self.rdzv_id,
            join_timeout_s=self.join_timeout_s,
        )

    def apply(self, spec: TorchrunSpec) -> TorchrunSpec:
        """The chain's TorchrunSpec with this node's rendezvous and the env the ranks need."""
        return replace(spec, env={**spec.env, **self.env}, **self.spec_fields())

    def adopt(self, outcome: RunOutcome, merge_plan: Plan) -> None:
        """Node 0 adds every node's rank payloads; the merge then judges only the ranks known here
        (the others ran on nodes whose own reports cover them)."""
        if self.is_node0:
            self.add_remote_ranks(outcome)
        merge_plan.ranks = set(outcome.ranks) | set(outcome.heartbeats)

    @contextlib.contextmanager
    def watch(self) -> Iterator[None]:
        if not self.is_node0:
            yield
            return
        with cluster.StoreWatch(self.endpoint.port) as w:
            self._watch = w
            yield

    def gathered(self) -> ClusterFile | None:
        """Node 0: what rank 0 gathered; None when no file came (the ranks never got there) or it was no
        record (then `_gather_unreadable` says why, and the report's facts show it)."""
        if self._gathered is None:
            try:
                text = self.cluster_file.read_text(encoding="utf-8", errors="replace")
            except OSError:
                return None
            try:
                self._gathered = ClusterFile.from_json(text, self.cluster_file.name)
            except RecordError as exc:
                self._gather_unreadable = str(exc)
        return self._gathered

    def add_remote_ranks(self, outcome: RunOutcome) -> None:
        """Node 0: the payloads of the other nodes' ranks join this node's own, so the chain's
        merge reports every rank of the cluster (each payload names its node)."""
        data = self.gathered()
        if not data:
            return
        for rank, entry in data.ranks.items():
            if rank in outcome.ranks:
                continue
            if entry.result is not None:
                outcome.ranks[rank] = entry.result
            elif entry.result_error is not None:
                outcome.unreadable[f"rank-{rank}.json"] = f"{entry.result_error} (gathered from its node)"

    def conclude(self, results: Sequence[Result], root_cause: str | None, outcome: RunOutcome) -> Conclusion:
        try:
            return self._conclude(results, root_cause, outcome)
        finally:
            with contextlib.suppress(OSError):
                self.cluster_file.unlink()
            with contextlib.suppress(OSError):
                self.cluster_file.parent.rmdir()

    def _conclude(self, results: Sequence[Result], root_cause: str | None, outcome: RunOutcome) -> Conclusion:
        log = "\n".join(outcome.logs.get("torchrun.log", []))
        rdzv = _RDZV_ERROR.findall(log)
        # After a good run, an agent may still log a store error while node 0 shuts the store down.
        failed_run = outcome.returncode != 0
        rdzv_error = rdzv[-1][0] if rdzv and failed_run else None
        seen = sorted(self._watch.seen) if self._watch else []
        data = self.gathered() if self.is_node0 else None
        facts = {
            **self.spec_fields(),
            "store_peers": seen,
            "role": "cluster report (node 0)" if self.is_node0 else "local report",
            "ranks_gathered": sorted(data.ranks) if data else None,
        }
        if self._gather_unreadable:
            facts["cluster_file_unreadable"] = self._gather_unreadable
        added = list(self.preflight)
        if self.is_node0 or rdzv_error:
            meaning = _RDZV_MEANING.get(rdzv_error or "", rdzv_error)
            if self.is_node0:
                added.append(cluster.joined(self.nnodes, data, seen, self.join_timeout_s, meaning))
            elif rdzv_error:
                added.append(
                    Result(
                        "multinode.joined",
                        "nodes joined the rendezvous",
                        Status.FAIL,
                        f"this node (node {self.node_rank}) left the rendezvous with {rdzv_error}",
                        cause=meaning,
                        remedy="read node 0's report: it says how many nodes joined; start every node "
                        "within --join-timeout of each other",
                        phase="rendezvous",
                        observed={"error": rdzv_error},
                        started=time.time(),
                    )
                )
        if data:
            added.extend(cluster.evaluate(data, self.backend))
        lead = None
        failed = any(r.status in (Status.FAIL, Status.ERROR) for r in [*results, *added])
        if failed and not rdzv_error:
            # A lost link explains every stuck rank on both sides: first on the screen, and the root cause.
            lead = self._lost(seen) or self._peer_failed([*results, *added], root_cause)
        return Conclusion(facts={"multinode": facts}, results=tuple(added), lead=lead)

    def _peer_failed(self, results: Sequence[Result], root_cause: str | None) -> Result | None:
        """The ranks here lost a peer on another node (its rank died first): name that node. Only when no
        rank of another node is in this report already (node 0 gathered them: their own results say it)."""
        local = {a for addrs in preflight.interface_addresses().values() for a in addrs}
        failed = [r for r in results if r.status is Status.FAIL]
        here = socket.gethostname()
        if any(r.node not in (None, here) and r.rank is not None for r in failed):
            return None
        root = next((r for r in failed if r.id == root_cause), None)
        if root is not None and _own_failure(root, local):
            return None  # a rank here failed on its own first (killed, raised): that is the cause, not a peer
        remote: list[str] = []
        phase = None
        for r in failed:
            lost = [a for a in cluster.peers_in_errors([r.summary, *(e.text for e in r.evidence)]) if a not in local]
            if lost and phase is None and r.rank is not None:
                phase = r.phase
            remote += [a for a in lost if a not in remote]
        return cluster.peer_failed(remote, phase) if remote else None

    def _lost(self, seen: list[str]) -> Result | None:
        if self.is_node0:
            local = [a for addrs in preflight.interface_addresses().values() for a in addrs]
            return cluster.lost_peers(seen, self.endpoint.port, local)
        addrs = list(self.preflight[0].observed.get("addresses") or []) if self.preflight else []
        if not addrs or cluster.reachable(addrs[0], self.endpoint.port):
            return None
        return cluster.link_lost(
            f"node 0 ({self.endpoint}) was reachable before the run and no longer answers from this node",
            "node 0",
            "check this node's link to node 0 (`ip link`, `nc -zv` to the endpoint) and node 0's report",
            endpoint=str(self.endpoint),
        )


def _own_failure(r: Result, local: set[str]) -> bool:
    """A rank's failure of its own: not a lost peer on another node, not torchrun's SIGTERM after one."""
    if r.rank is None or r.observed.get("exit_code") in (-15, 143):
        return False
    return not [a for a in cluster.peers_in_errors([r.summary, *(e.text for e in r.evidence)]) if a not in local]


def _preflight_facts(results: list[Result]) -> LinkFacts:
    """What the ranks pass to node 0 about this node: the interface it talks through."""
    for r in results:
        if r.id == preflight.IFNAME_ID and r.observed.get("interface"):
            return LinkFacts(
                interface=r.observed.get("interface"),
                address=r.observed.get("address"),
                variable=r.observed.get("variable"),
                value=r.observed.get("value"),
            )
    return LinkFacts()


def prepare(config: CheckConfig, backend: str, env: dict[str, str] | None = None) -> NodePlan:
    """The validated plan of a node of a multi-node check, with this node's preflight done."""
    nnodes, _, _ = _validate(config)
    endpoint = preflight.parse_endpoint(config.rdzv_endpoint or "")  # _validate refused a missing one
    join_timeout = float(config.join_timeout or max(10.0, config.timeout * JOIN_SHARE))
    if join_timeout >= config.timeout:
        raise UsageError(f"--join-timeout {join_timeout:g} must be shorter than --timeout {config.timeout:g}")
    node = socket.gethostname()
    env_now = {**os.environ, **(env or {})}
    # Other nodes may start a little after this one: wait for node 0's store up to the join timeout.
    results = preflight.preflight(str(endpoint), config.node_rank, backend, env_now, wait_s=join_timeout, node=node)
    owner.sweep(CLUSTER_DIR_PREFIX)  # left by a doctor that was killed (SIGKILL, the OOM killer)
    directory = owner.make_dir(CLUSTER_DIR_PREFIX)
    atexit.register(shutil.rmtree, directory, True)  # also on Ctrl-C between launch and conclude
    plan = NodePlan(
        nnodes=nnodes,
        node_rank=config.node_rank,
        endpoint=endpoint,
        rdzv_id=config.rdzv_id or f"ddp-doctor-{endpoint.port}",
        join_timeout_s=join_timeout,
        backend=backend,
        preflight=results,
        cluster_file=directory / "cluster.json",
    )
    plan.env = {CLUSTER_FILE_ENV: str(plan.cluster_file), PREFLIGHT_ENV: json.dumps(_preflight_facts(results))}
    return plan
