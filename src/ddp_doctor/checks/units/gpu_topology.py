"""Can the visible GPUs reach each other peer-to-peer (NVLink or PCIe P2P)?"""

from __future__ import annotations

from dataclasses import asdict

from ddp_doctor.checks.facts.gpu_devices import GpuFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status
from ddp_doctor.words import plural


def judge(g: GpuFacts) -> Finding:
    """Warns when NVML reports no P2P read between some pair of visible GPUs; counts NVLink pairs.

    Why: without peer-to-peer, NCCL stages intra-node traffic through host memory (lower bus
    bandwidth); IOMMU/ACS settings and VMs without P2P passthrough are the usual cause.
    """
    if len(g.visible) < 2:
        return skip(f"{plural(len(g.visible), 'visible GPU')}; topology matters from 2")
    if not g.pairs:
        return skip("NVML reported no pair topology")
    bad = [p for p in g.pairs if p.p2p_read not in ("ok", None)]
    nvlink = [p for p in g.pairs if p.p2p_nvlink == "ok"]
    observed = {"pairs": [asdict(p) for p in g.pairs]}
    if bad:
        shown = ", ".join(f"{p.a}<->{p.b}: {p.p2p_read} ({p.path})" for p in bad[:4])
        return Finding(
            Status.WARN,
            f"no P2P between {len(bad)} of {plural(len(g.pairs), 'GPU pair')}: {shown}",
            cause="without peer-to-peer, NCCL stages intra-node traffic through host memory: lower bus bandwidth",
            remedy="check IOMMU/ACS settings in the BIOS and kernel (`iommu=pt`), and that the VM passes GPUs with P2P enabled",
            observed=observed,
        )
    return Finding(
        Status.PASS,
        (
            f"P2P between all {plural(len(g.pairs), 'GPU pair')}; NVLink on {len(nvlink)} of them"
            if len(g.pairs) > 1
            else f"P2P between the {plural(len(g.pairs), 'GPU pair')}; NVLink on {len(nvlink)} of it"
        ),
        observed=observed,
        metrics={"gpu_pairs_nvlink": float(len(nvlink))},
    )


CHECK = Check(
    name="gpu_topology",
    title="GPU peer-to-peer topology",
    facts=GpuFacts,
    judge=judge,
    ids={"env": "env.gpu_topology"},
    order=130,
)
