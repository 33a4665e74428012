"""Can the NVIDIA driver run the CUDA version torch was built with?"""

from __future__ import annotations

from ddp_doctor import knowledge
from ddp_doctor.checks.facts.gpu_devices import TorchOnGpuFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.knowledge import DriverFloor, Release
from ddp_doctor.report import Status

vt = knowledge.version_tuple


def _upgrade(f: TorchOnGpuFacts, floor: DriverFloor) -> str:
    """Upgrade the driver, or install the same torch release built for a CUDA the driver runs."""
    t, driver_cuda = f.torch, f.gpus.cuda_driver_version
    rel = knowledge.release(t.version or "") or Release()
    fitting = [
        v
        for v in rel.get("cuda_variants", [])
        if driver_cuda and vt(knowledge.cuda_of(v) or "99")[:2] <= vt(driver_cuda)[:2]
    ]
    alt = (
        (
            f"\nor install the torch wheel built for CUDA <= {driver_cuda}:\n"
            f"{knowledge.install_command(str(t.version).split('+')[0], fitting[-1], t.install.python)}"
        )
        if fitting
        else ""
    )
    return f"upgrade the NVIDIA driver to >= {floor.get('ga_driver') or floor.get('minor_compat')} (the CUDA {t.cuda} GA driver){alt}"


def _new_enough(f: TorchOnGpuFacts, floor: DriverFloor) -> str | None:
    """Why the driver runs torch's CUDA outright, or None."""
    torch_cuda, driver, driver_cuda = str(f.torch.cuda), f.gpus.driver_version or "", f.gpus.cuda_driver_version
    if driver_cuda and vt(driver_cuda)[:2] >= vt(torch_cuda)[:2]:
        return f"driver {driver} supports CUDA {driver_cuda} >= torch's CUDA {torch_cuda}"
    ga = floor.get("ga_driver")
    if driver_cuda is None and ga and vt(driver) >= vt(ga):
        return f"driver {driver} >= {ga}, the CUDA {torch_cuda} GA driver"
    return None


def judge(f: TorchOnGpuFacts) -> Finding:
    """Passes when the driver's CUDA is at least torch's; warns when it runs torch's CUDA only
    through minor version compatibility; fails when the driver is of an older CUDA major family.

    Driver floors (GA driver, minor-compatibility driver per CUDA version) come from
    knowledge/cuda_drivers.yaml; the remedy offers the driver upgrade or the same torch release
    built for a CUDA the driver runs.
    """
    t, g = f.torch, f.gpus
    if not g.driver_loaded:
        return skip("no NVIDIA driver here")
    if t.flavour != "cuda" or not t.cuda:
        return skip(f"torch is not a CUDA build ({t.flavour or 'not installed'})")
    torch_cuda, driver, driver_cuda = str(t.cuda), g.driver_version or "", g.cuda_driver_version
    floor = knowledge.driver_floor(torch_cuda) or DriverFloor()
    observed = {"driver": driver, "driver_max_cuda": driver_cuda, "torch_cuda": torch_cuda}
    expected = {"minor_compat_driver": floor.get("minor_compat"), "ga_driver": floor.get("ga_driver")}
    fine = _new_enough(f, floor)
    if fine:
        return Finding(Status.PASS, fine, observed=observed, expected=expected)
    tv, compat = vt(torch_cuda)[:2], floor.get("minor_compat")
    same_major = driver_cuda is None or vt(driver_cuda)[:1] == tv[:1]
    if compat and same_major and vt(driver) >= vt(compat):
        return Finding(
            Status.WARN,
            f"driver {driver} (CUDA {driver_cuda or '?'}) is older than torch's CUDA {torch_cuda}; it runs only through minor version compatibility (>= {compat})",
            cause="with minor version compatibility, PTX JIT of newer PTX and some new CUDA APIs fail (cudaErrorCallRequiresNewerDriver)",
            remedy=_upgrade(f, floor),
            observed=observed,
            expected=expected,
        )
    return Finding(
        Status.FAIL,
        f"driver {driver} supports CUDA {driver_cuda or '?'}, but torch is built with CUDA {torch_cuda}, which needs driver >= {compat or floor.get('ga_driver')}",
        cause=f"CUDA {torch_cuda} applications need a driver of the CUDA {tv[0]}.x family (>= {compat}); CUDA initialisation fails with 'driver too old'",
        remedy=_upgrade(f, floor),
        observed=observed,
        expected=expected,
    )


CHECK = Check(
    name="driver_cuda",
    title="driver vs CUDA runtime",
    facts=TorchOnGpuFacts,
    judge=judge,
    ids={"env": "env.driver_cuda"},
    order=110,
    tags=frozenset({"environment"}),
)
