"""The CUDA libraries a CUDA build of torch loads at run time: the CUDA runtime and cuDNN."""

from __future__ import annotations

from ddp_doctor.checks.facts.image_only import CudaLibFacts, CudaRuntimeFacts, CudnnFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status

_REMEDY = "use an official torch CUDA wheel (it brings the nvidia-* runtime wheels) or a CUDA runtime base image"


def _library(f: CudaLibFacts, title: str, why: str) -> Finding:
    if f.flavour != "cuda":
        return skip("no CUDA build of torch")
    if f.library is None:
        return Finding(
            Status.WARN,
            f"no {title} library found for torch {f.torch_version} (CUDA {f.torch_cuda})",
            cause=why,
            remedy=_REMEDY,
            observed={"library": None},
            expected={"library": "present"},
        )
    return Finding(
        Status.PASS,
        f"{title} {f.version or '(version unknown)'} from {f.source}: {f.library}",
        observed={"library": f.library, "version": f.version, "source": f.source},
    )


def judge_cuda_runtime(f: CudaRuntimeFacts) -> Finding:
    """Warns when a CUDA build of torch has no libcudart beside it (torch/lib, an nvidia-cuda-runtime
    wheel or the system's library directories); a SKIP for a CPU or ROCm build.

    Why: `import torch` fails with a missing libcudart unless it is linked in statically.
    """
    return _library(
        f, "CUDA runtime", "`import torch` fails with a missing libcudart unless it is linked in statically"
    )


def judge_cudnn(f: CudnnFacts) -> Finding:
    """Warns when a CUDA build of torch has no cuDNN beside it; a SKIP for a CPU or ROCm build.

    Why: convolutions fail at the first use; DDP itself does not need cuDNN.
    """
    return _library(f, "cuDNN", "convolutions fail at the first use; DDP itself does not need cuDNN")


CUDA_RUNTIME = Check(
    name="cuda_runtime",
    title="CUDA runtime",
    facts=CudaRuntimeFacts,
    judge=judge_cuda_runtime,
    ids={"image": "image.cuda_runtime"},
    order=84,
)
CUDNN = Check(name="cudnn", title="cuDNN", facts=CudnnFacts, judge=judge_cudnn, ids={"image": "image.cudnn"}, order=86)
