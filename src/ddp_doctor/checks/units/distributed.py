"""Was torch built with torch.distributed and the backends DDP needs (NCCL on CUDA, gloo always)?"""

from __future__ import annotations

from ddp_doctor.checks.facts.software import TorchFacts
from ddp_doctor.checks.install import install_for
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status

BACKENDS = ("nccl", "gloo", "mpi")


def _reinstall(f: TorchFacts) -> str:
    return install_for(f.install, str(f.version).split("+")[0])


def _no_gloo(f: TorchFacts, have: list[str], observed: dict[str, object]) -> Finding:
    return Finding(
        Status.WARN if f.backends.get("nccl") else Status.FAIL,
        f"no gloo backend (has: {', '.join(have) or 'none'}); expected gloo for CPU tensors and as fallback",
        cause="torch was built with USE_GLOO=0",
        remedy="install an official wheel, which includes gloo",
        observed=observed,
        expected={"gloo": True},
    )


def judge(f: TorchFacts) -> Finding:
    """Fails when torch.distributed is not available, or a CUDA build lacks NCCL, or no backend at
    all is built; warns when gloo is missing beside NCCL (CPU tensors and the fallback need it).

    Skipped where torch was not imported (an image; the live chain probes it in every rank).
    """
    if not f.usable or f.distributed is None:
        return skip("torch is not importable here, so torch.distributed was not probed")
    have = [b for b in BACKENDS if f.backends.get(b)]
    observed: dict[str, object] = {"distributed": f.distributed, "backends": dict(f.backends)}
    if not f.distributed:
        return Finding(
            Status.FAIL,
            "torch.distributed.is_available() is False; expected True",
            cause="this torch was built without distributed support (USE_DISTRIBUTED=0), common in mobile or minimal builds",
            remedy=f"install an official wheel:\n{_reinstall(f)}",
            observed=observed,
            expected={"distributed": True},
        )
    if f.flavour == "cuda" and not f.backends.get("nccl"):
        return Finding(
            Status.FAIL,
            f"CUDA build without the NCCL backend (has: {', '.join(have) or 'none'}): this environment cannot run DDP on GPUs",
            cause="torch was built with USE_NCCL=0 or its NCCL could not be linked",
            remedy=f"install an official CUDA wheel, which always includes NCCL:\n{_reinstall(f)}",
            observed=observed,
            expected={"nccl": True},
        )
    if not f.backends.get("gloo"):
        return _no_gloo(f, have, observed)
    missing = [b for b in BACKENDS if not f.backends.get(b)]
    return Finding(
        Status.PASS,
        f"torch.distributed available; backends: {', '.join(have)}"
        + (f" (not built: {', '.join(missing)})" if missing else ""),
        observed=observed,
    )


CHECK = Check(
    name="distributed",
    title="torch.distributed and backends",
    facts=TorchFacts,
    judge=judge,
    ids={"env": "env.distributed"},
    order=70,
    tags=frozenset({"environment", "torch_build"}),
)
