"""Does torch carry kernels (SASS or PTX) for the architecture of every visible GPU?"""

from __future__ import annotations

from ddp_doctor import knowledge
from ddp_doctor.checks.facts.gpu_devices import GpuDevice, TorchOnGpuFacts
from ddp_doctor.checks.install import fits_driver
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.knowledge import arch
from ddp_doctor.report import Status


def _missing(f: TorchOnGpuFacts, d: GpuDevice, sm: str, observed: dict[str, object]) -> Finding:
    t, archs = f.torch, list(f.torch.arch_list)
    version = t.version or ""
    builds = knowledge.variants_supporting(version, sm)
    builds = [b for b in builds if fits_driver(b, f.gpus.cuda_driver_version)] or builds
    base = version.split("+")[0]
    remedy = (
        f"install a build with {sm} kernels:\n" + knowledge.install_command(base, builds[-1], t.install.python)
        if builds
        else f"install a torch release whose wheels include {sm} (see the release's CUDA support matrix)"
    )
    return Finding(
        Status.FAIL,
        f"no kernel image for {sm} ({d.name}): this torch has {' '.join(archs)}",
        cause=f"neither {sm} SASS, an older {sm[:4]}x SASS of the same major, nor PTX <= {sm[3:]} is compiled into this build; "
        "every CUDA kernel fails with 'no kernel image is available for execution on the device'",
        remedy=remedy,
        observed=observed,
        expected={"arch": sm},
    )


def judge(f: TorchOnGpuFacts) -> Finding:
    """Fails when a visible GPU's sm_XY is neither compiled into torch (SASS of that arch or an
    older one of the same major) nor reachable by PTX JIT; names how each GPU runs otherwise.

    The rules are knowledge/arch.py's; the remedy picks a build of the same release that has the
    arch (knowledge/torch_releases.yaml) and that the driver runs.
    """
    t, visible = f.torch, f.gpus.visible
    if not visible:
        return skip("no visible GPU")
    if t.flavour != "cuda":
        return skip(f"torch is not a CUDA build ({t.flavour or 'not installed'})")
    archs = list(t.arch_list)
    if not archs:
        return skip("torch's compiled arch list is unknown (torch was not imported here)")
    fine: list[tuple[GpuDevice, str, str | None]] = []
    missing: list[tuple[GpuDevice, str, str | None]] = []
    for d in visible:
        if not d.compute_capability:
            continue
        sm = arch.sm_name(d.compute_capability)
        how = arch.how_it_runs(sm, archs)
        (fine if how else missing).append((d, sm, how))
    observed: dict[str, object] = {"arch_list": archs, "gpus": [sm for _, sm, _ in fine + missing]}
    if missing:
        d, sm, _ = missing[0]
        return _missing(f, d, sm, observed)
    runs = "; ".join(f"{sm} ({d.name}) via {how}" for d, sm, how in fine)
    return Finding(Status.PASS, f"{runs}", observed=observed)


CHECK = Check(
    name="gpu_arch",
    title="GPU architecture in torch's kernels",
    facts=TorchOnGpuFacts,
    judge=judge,
    ids={"env": "env.gpu_arch"},
    order=120,
    tags=frozenset({"environment"}),
)
