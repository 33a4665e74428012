"""Which container runtime is this, and did it pass the GPUs in?"""

from __future__ import annotations

from ddp_doctor.checks import table
from ddp_doctor.checks.facts.host import ContainerFacts
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status


def judge(f: ContainerFacts) -> Finding:
    """Fails in a container that has GPU device nodes but no NVIDIA driver libraries (started
    without --gpus / CDI / the NVIDIA runtime); otherwise names the runtime and its evidence.

    The remedy is the shared `gpu_runtime` entry of checks/knowledge.yaml, the same words as
    env.gpus and env.gpus.expected.
    """
    g = f.gpus
    evidence = ", ".join(f.evidence)
    where = (
        f"{f.kind} container" + (" in Kubernetes" if f.kubernetes and f.kind != "kubernetes" else "")
        if f.in_container
        else "not in a container"
    )
    observed = {"kind": f.kind, "kubernetes": f.kubernetes, "device_nodes": list(g.device_nodes)}
    if f.in_container and g.device_nodes and not g.driver_loaded:
        return Finding(
            Status.FAIL,
            f"{where}: GPU device nodes are present but the NVIDIA driver libraries are not ({g.error})",
            cause="the container was started without --gpus / the NVIDIA container runtime, so libnvidia-ml and libcuda were not mounted",
            remedy=table.gpu_runtime().remedy,
            observed=observed,
        )
    if f.in_container and not g.device_nodes and not g.driver_loaded:
        return Finding(
            Status.PASS,
            f"{where} ({evidence}); no GPU was passed in (if the host has GPUs: start it with --gpus all)",
            observed=observed,
        )
    return Finding(Status.PASS, f"{where}" + (f" ({evidence})" if evidence else ""), observed=observed)


CHECK = Check(
    name="container",
    title="container and GPU runtime",
    facts=ContainerFacts,
    judge=judge,
    ids={"env": "env.container"},
    order=160,
)
