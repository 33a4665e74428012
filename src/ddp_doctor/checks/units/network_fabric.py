"""Can this host reach other nodes (a usable interface), and can NCCL use its InfiniBand?"""

from __future__ import annotations

from ddp_doctor.checks.facts.host import NetworkFacts
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status


def judge(f: NetworkFacts) -> Finding:
    """Warns when InfiniBand devices exist without libibverbs (NCCL then uses TCP), and when only
    loopback has an address (multi-node training cannot reach other nodes; single-node is fine).
    """
    ib = f.infiniband
    usable = [i for i in f.interfaces if not i.loopback and i.addresses and i.state != "down"]
    shown = ", ".join(f"{i.name} {i.addresses[0]}" for i in usable[:4])
    observed = {
        "interfaces": [i.name for i in f.interfaces],
        "usable": [i.name for i in usable],
        "infiniband": None if ib is None else list(ib),
        "libibverbs": f.libibverbs,
    }
    if ib and not f.libibverbs:
        return Finding(
            Status.WARN,
            f"InfiniBand devices {', '.join(ib)} but no libibverbs; interfaces: {shown or 'loopback only'}",
            cause="NCCL needs libibverbs (rdma-core) to use InfiniBand/RoCE; without it multi-node traffic uses TCP",
            remedy="install rdma-core / libibverbs1 in the image (apt-get install -y libibverbs1 ibverbs-providers)",
            observed=observed,
        )
    if not usable:
        return Finding(
            Status.WARN,
            "only loopback has an address; multi-node training cannot reach other nodes",
            cause="no non-loopback interface is up with an address",
            remedy="for multi-node runs attach a network (docker --network host, a pod network); single-node runs are fine",
            observed=observed,
        )
    ib_note = f"; InfiniBand: {', '.join(ib)}" if ib else "; no InfiniBand"
    return Finding(Status.PASS, f"{shown}{ib_note}", observed=observed)


CHECK = Check(
    name="network",
    title="network interfaces and InfiniBand",
    facts=NetworkFacts,
    judge=judge,
    ids={"env": "env.network"},
    order=190,
)
