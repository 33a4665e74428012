"""Do the process limits leave room for RDMA (memlock) and for ranks, workers and sockets (nofile)?"""

from __future__ import annotations

from ddp_doctor.checks import table
from ddp_doctor.checks.facts.host import UlimitsFacts
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status


def judge(f: UlimitsFacts) -> Finding:
    """Warns when memlock is limited on a host with InfiniBand devices (NCCL pins its RDMA buffers)
    and when the open-file limit is under `ulimits.nofile_warn_below` (checks/knowledge.yaml).

    memlock matters only with InfiniBand/RDMA, so without it a limited memlock passes.
    """
    rule = table.ulimits()
    memlock, nofile = f.memlock_soft_bytes, f.nofile_soft
    shown = (
        f"memlock {'unlimited' if memlock is None else table.size_text(memlock)}, "
        f"nofile {'unlimited' if nofile is None else nofile}"
    )
    observed = {"memlock_soft_bytes": memlock, "nofile_soft": nofile, "infiniband": list(f.infiniband)}
    if f.infiniband and memlock is not None:
        return Finding(
            Status.WARN,
            f"{shown} with InfiniBand devices {', '.join(f.infiniband)}; expected memlock unlimited",
            cause=rule.memlock_cause,
            remedy=rule.memlock_remedy,
            observed=observed,
            expected={"memlock": "unlimited"},
        )
    if nofile is not None and nofile < rule.nofile_warn_below:
        return Finding(
            Status.WARN,
            f"{shown}; expected nofile >= {rule.nofile_warn_below}",
            cause="each DataLoader worker, rank and NCCL connection holds file descriptors; 'Too many open files' follows",
            remedy=rule.nofile_remedy,
            observed=observed,
            expected={"nofile": f">= {rule.nofile_warn_below}"},
        )
    note = "" if f.infiniband else " (memlock matters only with InfiniBand/RDMA, none here)"
    return Finding(Status.PASS, shown + note, observed=observed)


CHECK = Check(
    name="ulimits",
    title="ulimits (memlock, nofile)",
    facts=UlimitsFacts,
    judge=judge,
    ids={"env": "env.ulimits"},
    order=150,
)
