"""Does the CUDA build of torch have a working NCCL, and is it the one the release shipped?"""

from __future__ import annotations

from ddp_doctor import knowledge
from ddp_doctor.checks.facts.software import NcclFacts
from ddp_doctor.checks.install import install_for
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status

CANNOT = "this environment cannot run DDP on GPUs"


def _missing(f: NcclFacts, observed: dict[str, object], reinstall: str) -> Finding:
    req = next((r.split(";")[0].strip() for r in f.torch.requires if r.lower().startswith("nvidia-nccl")), None)
    return Finding(
        Status.FAIL,
        f"no NCCL library found for this CUDA build of torch {f.torch.version}: {CANNOT}",
        cause=f"torch's METADATA requires {req}, which is not installed"
        if req
        else "libnccl.so is neither in torch/lib, in an nvidia-nccl-cu* package nor linked into libtorch_cuda "
        "(removed, or a partial install)",
        remedy=f"{f.torch.install.python} -m pip install '{req}'"
        if req
        else f"reinstall torch with its NCCL package:\n{reinstall} --force-reinstall",
        observed=observed,
        expected={"library": "libnccl.so.2"},
    )


def judge(f: NcclFacts) -> Finding:
    """Fails when a CUDA build of torch has no NCCL (absent, not built in, or not loadable); warns
    when its version differs from the one the official wheel of that release ships.

    Expected versions come from knowledge/torch_releases.yaml. An NCCL inside torch/lib is the one
    torch was built with, so it is never compared.
    """
    t = f.torch
    if not t.installed:
        return skip("torch is not installed")
    if t.flavour != "cuda":
        return skip(f"{t.flavour or 'unknown'} build of torch: no NCCL; DDP uses gloo")
    observed: dict[str, object] = {
        "library": f.library,
        "source": f.source,
        "version": f.version,
        "torch_reports": t.nccl_version,
        "loadable": f.loadable,
        "package": f.package,
    }
    reinstall = install_for(t.install, (t.version or "").split("+")[0])
    if t.importable and t.distributed and not t.backends.get("nccl"):
        return Finding(
            Status.FAIL,
            f"CUDA build of torch without NCCL: {CANNOT}",
            cause="torch.distributed.is_nccl_available() is False",
            remedy=f"install an official CUDA wheel:\n{reinstall}",
            observed=observed,
            expected={"nccl": True},
        )
    if not f.library and not f.version:
        return _missing(f, observed, reinstall)
    if f.loadable is False:
        return Finding(
            Status.FAIL,
            f"{f.library} does not load: {f.error}; {CANNOT}",
            cause="the NCCL library is broken or depends on a library that is missing",
            remedy=f"reinstall torch with its NCCL package:\n{reinstall} --force-reinstall",
            observed=observed,
            expected={"loadable": True},
        )
    return _against_release(f, observed)


def _against_release(f: NcclFacts, observed: dict[str, object]) -> Finding:
    """A working NCCL: the version the official wheel of this torch release ships, or a warning."""
    t = f.torch
    version = f.version or t.nccl_version
    rel = knowledge.release(t.version or "")
    local = (t.version or "").partition("+")[2]
    variant = local if local.startswith("cu") else knowledge.variant_of(t.cuda)
    expected = (rel or {}).get("nccl", {}).get(variant)
    where = f"{f.library or 'inside torch'} ({f.source})"
    bundled = f.source == "torch/lib"
    if rel and expected and version and version.split("+")[0] != expected and not bundled:
        return Finding(
            Status.WARN,
            f"NCCL {version} from {where}; the official torch {rel['version']}+{variant} wheel ships NCCL {expected}",
            cause="a different nvidia-nccl package (or an LD_LIBRARY_PATH / LD_PRELOAD copy) replaced the one torch was released with",
            remedy=f"unless you upgraded NCCL on purpose, restore it: {t.install.python} -m pip install 'nvidia-nccl-{variant[:4]}=={expected}'",
            observed=observed,
            expected={"version": expected},
        )
    loads = " loads" if f.loadable else ""
    return Finding(
        Status.PASS,
        f"NCCL {version or '(version unknown)'} from {where}{loads}",
        observed=observed,
        expected={"version": expected} if expected else {},
    )


CHECK = Check(
    name="nccl",
    title="NCCL library",
    facts=NcclFacts,
    judge=judge,
    ids={"env": "env.nccl", "image": "image.nccl"},
    order=80,
    tags=frozenset({"environment", "torch_build"}),
)
