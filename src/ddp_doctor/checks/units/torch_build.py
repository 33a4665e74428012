"""Is torch installed, and is its build the one this subject needs (CUDA where GPUs are expected)?"""

from __future__ import annotations

from ddp_doctor.checks.facts.software import TorchFacts
from ddp_doctor.checks.install import install_for
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status


def cudnn_text(version: int | str | None) -> str:
    """torch reports cuDNN as an int: 90501 -> 9.5.1 (cuDNN 9+), 8902 -> 8.9.2 (cuDNN 8)."""
    try:
        v = int(version or "")
    except (TypeError, ValueError):
        return str(version)
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v % 1000 // 100}.{v % 100}"


def installed(f: TorchFacts) -> Finding:
    """Fails when no torch is installed for the interpreter that will run the job.

    The remedy is the pip command for the newest official wheel that fits that Python and, with
    GPUs, the driver's CUDA (release tables in knowledge/).
    """
    if f.installed:
        return Finding(
            Status.PASS,
            f"torch {f.metadata_version or f.version} installed at {f.location}",
            observed={"version": f.version, "location": f.location},
        )
    return Finding(
        Status.FAIL,
        f"torch is not installed for {f.install.python}; expected an installed torch",
        cause="no `torch` distribution and no importable torch package in this interpreter's environment",
        remedy=f"install it into this environment:\n{install_for(f.install)}",
        observed={"installed": False},
        expected={"installed": True},
    )


def _cpu_build(f: TorchFacts, observed: dict[str, object]) -> Finding:
    if f.gpus_expected:
        return Finding(
            Status.FAIL,
            f"CPU-only torch {f.version} {f.gpus_expected}; expected a CUDA build",
            cause="a CPU wheel has no CUDA kernels and no NCCL (the +cpu index, or an unpinned install in a "
            "CPU-only image): DDP runs only with gloo on CPUs",
            remedy=f"install a CUDA build:\n{install_for(f.install, (f.version or '').split('+')[0])}",
            observed=observed,
            expected={"flavour": "cuda"},
        )
    return Finding(
        Status.PASS,
        f"CPU-only build of torch {f.version}; no GPU here, so DDP runs on CPU with the gloo backend",
        observed=observed,
    )


def build(f: TorchFacts) -> Finding:
    """Fails on a CPU-only torch where GPUs are expected; warns when pip's torch is not the imported one.

    A host expects GPUs when NVML sees some; an image is read as one meant for GPU training. Two
    copies of torch (PYTHONPATH, a user site) are seen when the imported version differs from pip's.
    """
    if not f.installed or f.importable is False:
        return skip("torch is not usable (see env.torch.installed / env.torch.import)")
    observed: dict[str, object] = {"flavour": f.flavour, "cuda": f.cuda, "hip": f.hip, "cudnn": f.cudnn}
    meta_v, import_v = f.metadata_version, f.version
    # PyPI wheels carry no local tag in their metadata ("2.11.0") but report one ("2.11.0+cu130").
    if meta_v and import_v and f.source == "import" and meta_v.split("+")[0] != import_v.split("+")[0]:
        return Finding(
            Status.WARN,
            f"pip metadata says torch {meta_v} but Python imports torch {import_v} from {f.location}",
            cause="two copies of torch: PYTHONPATH, a user site-packages or a source tree shadows the installed one",
            remedy="remove the extra copy (check PYTHONPATH and `python -m site`), so the torch pip manages is the one imported",
            observed={"metadata_version": meta_v, "imported_version": import_v},
        )
    if f.flavour == "cpu":
        return _cpu_build(f, observed)
    if f.flavour == "rocm":
        return Finding(Status.PASS, f"ROCm build of torch {import_v} (HIP {f.hip})", observed=observed)
    # cuDNN only when torch reported it: DDP does not need it, and an image reports its library separately.
    cudnn = f", cuDNN {cudnn_text(f.cudnn)}" if f.cudnn else ""
    return Finding(Status.PASS, f"CUDA {f.cuda} build of torch {import_v}{cudnn} at {f.location}", observed=observed)


INSTALLED = Check(
    name="torch.installed",
    title="torch installed",
    facts=TorchFacts,
    judge=installed,
    ids={"env": "env.torch.installed", "image": "image.torch"},
    order=20,
    tags=frozenset({"environment"}),
)
BUILD = Check(
    name="torch.build",
    title="torch build flavour",
    facts=TorchFacts,
    judge=build,
    ids={"env": "env.torch.build", "image": "image.torch"},
    order=40,
    tags=frozenset({"environment", "torch_build"}),
)
