"""What the workload is, read before any rule judges it: GPU or CPU, ranks per container, DataLoader
workers. Each fact keeps the line it was read from, so a finding can say what it assumed and why."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ddp_doctor.deploy.lint.model import At, Unit
from ddp_doctor.words import count

_CPU_IMAGE = re.compile(r"(^|[/:_.-])cpu($|[/:_.-])", re.IGNORECASE)
_GPU_IMAGE = re.compile(r"(^|[/:_.-])(cuda|cu\d{2,3}|gpu)($|[/:_.\d-])|nvcr\.io[/#]nvidia/|^nvidia/", re.IGNORECASE)
_GPU_ENV = re.compile(r"^(NCCL_|TORCH_NCCL_|CUDA_DEVICE_MAX_CONNECTIONS$|NVTE_)")
_OFF = ("void", "none", "")


@dataclass(frozen=True)
class Workload:
    device: At[str] | None
    """'gpu' or 'cpu' and the line that says so; None when nothing in the file tells."""
    why: str
    """What was read, for the finding: 'nvidia.com/gpu: 8', 'NVIDIA_VISIBLE_DEVICES=void', 'gloo backend'."""
    ranks: At[int] | None
    """Ranks started in one container / on one node, when known."""
    ranks_why: str
    workers: At[int] | None
    """DataLoader workers per rank, when the command says."""


MAX_SCRIPT_BYTES = 1 << 20
_INIT_BACKEND = re.compile(r"init_process_group\(\s*(?:backend\s*=\s*)?[\"'](nccl|gloo)[\"']")
_DEFAULT_BACKEND = re.compile(r"[\"']--?(?:dist[-_])?backend[\"'][^)]*?default\s*=\s*[\"'](nccl|gloo)[\"']", re.DOTALL)


def script_backend(config: str, script: At[str] | None) -> At[str] | None:
    """The backend the training script picks, when the script sits beside the config in the repository:
    init_process_group("gloo") / (backend="nccl"), or the default of its --backend flag."""
    if script is None or "$" in script.value:
        return None
    base = Path(config).resolve().parent
    for candidate in (base / script.value, base / Path(script.value).name):
        try:
            if candidate.is_file() and candidate.stat().st_size <= MAX_SCRIPT_BYTES:
                text = candidate.read_text(encoding="utf-8", errors="replace")
            else:
                continue
        except OSError:
            continue
        m = _INIT_BACKEND.search(text) or _DEFAULT_BACKEND.search(text)
        if m:
            return At(f"{m.group(1)} in {candidate.name} (init_process_group / --backend default)", script.line)
    return None


def _cpu(u: Unit) -> At[str] | None:
    for launch in u.launches:
        found = script_backend(u.file, launch.script)
        if found is not None and found.value.startswith("gloo"):
            return At(f"the backend {found.value}", found.line)
        if launch.backend is not None and launch.backend.value.lower() == "gloo":
            return At("the gloo backend", launch.backend.line)
        if launch.device_hint is not None and launch.device_hint.value == "cpu":
            return At(f"{launch.tool} is told to run on CPU", launch.device_hint.line)
    for key, value in u.env.items():
        if key == "NVIDIA_VISIBLE_DEVICES" and value.value.strip("'\"").lower() in _OFF:
            return At(f"NVIDIA_VISIBLE_DEVICES={value.value}", value.line)
        if "BACKEND" in key.upper() and value.value.lower() == "gloo":
            return At(f"{key}=gloo", value.line)
        if key.startswith("CCL_"):
            return At(f"{key} (oneCCL, a CPU collective library)", value.line)
    if u.image is not None and _CPU_IMAGE.search(u.image.value):
        return At(f"the CPU image {u.image.value}", u.image.line)
    return None


def _gpu(u: Unit) -> At[str] | None:
    if u.gpus is not None:
        return At(f"{count('all' if u.gpus.value is None else u.gpus.value, 'GPU')} granted", u.gpus.line)
    for launch in u.launches:
        if launch.backend is not None and launch.backend.value.lower() == "nccl":
            return At("the nccl backend", launch.backend.line)
        found = script_backend(u.file, launch.script)
        if found is not None and found.value.startswith("nccl") and launch.backend is None:
            return At(f"the backend {found.value}", found.line)
        if launch.device_hint is not None and launch.device_hint.value == "gpu":
            return At(f"{launch.tool} is told to use GPUs", launch.device_hint.line)
        if launch.srun_gpus is not None:
            return At(f"srun asks for {count(launch.srun_gpus.value, 'GPU')} per node", launch.srun_gpus.line)
        if launch.nproc is not None and launch.nproc.value == "gpu":
            return At("--nproc-per-node=gpu", launch.nproc.line)
    if u.gpu_evidence is not None:
        return u.gpu_evidence
    for key, value in u.env.items():
        if _GPU_ENV.match(key):
            return At(f"{key} is set (NCCL runs on GPUs)", value.line)
    if u.image is not None and _GPU_IMAGE.search(u.image.value):
        return At(f"the CUDA image {u.image.value}", u.image.line)
    return None


def _ranks(u: Unit) -> tuple[At[int] | None, str]:
    for launch in u.launches:
        if launch.nproc is not None:
            if launch.nproc.value.isdigit():
                return At(int(launch.nproc.value), launch.nproc.line), f"{launch.tool} nproc {launch.nproc.value}"
            if launch.nproc.value in ("gpu", "auto") and u.gpus is not None and u.gpus.value is not None:
                return At(u.gpus.value, launch.nproc.line), f"nproc {launch.nproc.value} = {count(u.gpus.value, 'GPU')}"
            return None, ""
    if u.nproc_declared is not None:
        if u.nproc_declared.value.isdigit():
            return At(int(u.nproc_declared.value), u.nproc_declared.line), f"{u.nproc_what} {u.nproc_declared.value}"
        if u.nproc_declared.value == "auto" and u.gpus is not None and u.gpus.value is not None:
            return At(u.gpus.value, u.nproc_declared.line), f"{u.nproc_what} auto = {count(u.gpus.value, 'GPU')}"
        return None, ""
    for launch in u.launches:
        if launch.tool in ("torchrun", "tune") and u.operator is None:
            return At(1, launch.line), f"{launch.tool} without --nproc-per-node (its default: 1)"
        if launch.tool == "deepspeed" and u.gpus is not None and u.gpus.value is not None:
            return At(u.gpus.value, launch.line), f"deepspeed without --num_gpus = {count(u.gpus.value, 'GPU')}"
    if u.trains and not u.launches and u.operator == "pytorchjob":
        return At(1, u.line), "the operator starts one process per pod (no torchrun, no nprocPerNode)"
    return None, ""


def workload(u: Unit) -> Workload:
    gpu, cpu = _gpu(u), _cpu(u)
    # A GPU granted outranks a backend flag: gloo on GPUs is still a GPU pod. Without a grant, CPU
    # evidence wins over hints such as NCCL_* variables left in a template.
    device: At[str] | None
    if u.gpus is not None and gpu is not None:
        device, why = At("gpu", gpu.line), gpu.value
    elif cpu is not None:
        device, why = At("cpu", cpu.line), cpu.value
    elif gpu is not None:
        device, why = At("gpu", gpu.line), gpu.value
    else:
        device, why = None, "nothing in the file says GPU or CPU"
    ranks, ranks_why = _ranks(u)
    workers = next((launch.workers for launch in u.launches if launch.workers is not None), None)
    return Workload(device, why, ranks, ranks_why, workers)


def describe(w: Workload, per: str = "container") -> str:
    """'GPU job (8 GPUs granted, line 40); 8 ranks per container (torchrun nproc 8, line 22)'."""
    parts = []
    if w.device is not None:
        parts.append(f"{w.device.value.upper()} job ({w.why}, line {w.device.line})")
    else:
        parts.append("GPU or CPU not stated")
    if w.ranks is not None:
        parts.append(f"{count(w.ranks.value, 'rank')} per {per} ({w.ranks_why}, line {w.ranks.line})")
    if w.workers is not None:
        parts.append(f"{count(w.workers.value, 'DataLoader worker')} per rank (line {w.workers.line})")
    return "; ".join(parts)
