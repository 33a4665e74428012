"""Which GPUs does NVML see, and which of them can CUDA use (CUDA_VISIBLE_DEVICES, MIG)?"""

from __future__ import annotations

from ddp_doctor.checks import table
from ddp_doctor.checks.facts.gpu_devices import GpuDevice, GpuFacts, GpusFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.knowledge import arch
from ddp_doctor.report import Status
from ddp_doctor.words import plural


def _names(visible: tuple[GpuDevice, ...]) -> str:
    return ", ".join(
        f"{d.index}: {d.name} ({table.size_text(d.memory_bytes)}, "
        f"{arch.sm_name(d.compute_capability) if d.compute_capability else 'sm_?'})"
        for d in visible
    )


def _no_nvml(f: GpusFacts) -> Finding:
    g = f.gpus
    if g.nvml_missing:
        return Finding(
            Status.ERROR,
            f"cannot look for GPUs: {g.error}",
            cause="ddp-doctor's own dependency nvidia-ml-py (pynvml) is missing, so NVML was never asked",
            remedy=f"{f.python} -m pip install nvidia-ml-py",
        )
    if g.device_nodes:
        return Finding(
            Status.FAIL,
            f"GPU device nodes exist ({', '.join(g.device_nodes[:3])}) but NVML does not work: {g.error}",
            cause="the NVIDIA user-space driver (libnvidia-ml.so, libcuda.so) is missing or does not match the kernel module",
            remedy=table.gpu_runtime().remedy
            + "\non a host: reinstall the driver so user-space and kernel module versions match, then reboot",
            observed={"device_nodes": list(g.device_nodes), "error": g.error},
        )
    return skip(
        f"no NVIDIA driver or GPU here ({g.error or 'NVML unavailable'}): "
        "GPU checks skipped; DDP can still run on CPU with gloo"
    )


def _selection(g: GpuFacts, observed: dict[str, object]) -> Finding | None:
    """A CUDA_VISIBLE_DEVICES that names more devices than resolve, or MIG slices: a warning."""
    names, cvd = _names(g.visible), g.cuda_visible_devices
    entries = [e for e in (cvd or "").split(",") if e.strip()]
    if cvd is not None and len(entries) > len(g.visible):
        return Finding(
            Status.WARN,
            f"CUDA_VISIBLE_DEVICES={cvd!r} names {plural(len(entries), 'device')} but only {len(g.visible)} resolve: {names}",
            cause="CUDA stops at the first entry that matches no GPU and ignores the rest",
            remedy="fix CUDA_VISIBLE_DEVICES to existing indices or UUIDs (`nvidia-smi -L`)",
            observed=observed,
        )
    migs = [d for d in g.visible if d.mig_mode == "enabled"]
    if migs:
        return Finding(
            Status.WARN,
            f"MIG mode is on for {'GPU' if len(migs) == 1 else 'GPUs'} {', '.join(str(d.index) for d in migs)}: {names}",
            cause="NCCL cannot connect several MIG instances (no P2P or CUDA IPC between them); DDP across MIG slices fails",
            remedy="use whole GPUs for DDP (`nvidia-smi -i N -mig 0`), or one MIG slice per job",
            observed=observed,
        )
    return None


def judge(f: GpusFacts) -> Finding:
    """Lists the GPUs CUDA can use; fails when device nodes exist but NVML does not work (the
    driver libraries are missing or mismatched); warns when CUDA_VISIBLE_DEVICES hides every GPU
    or names devices that do not resolve, and when MIG is on (NCCL cannot join MIG slices).

    Skipped without a driver or a GPU: DDP can still run on CPU with gloo.
    """
    g = f.gpus
    if g.nvml_missing or not g.driver_loaded:
        return _no_nvml(f)
    if g.error:
        return Finding(
            Status.ERROR,
            f"NVML started but a query failed: {g.error}",
            cause="the doctor could not read the GPUs; this is not a verdict on them",
        )
    physical, visible, cvd = g.physical_count, g.visible, g.cuda_visible_devices
    observed: dict[str, object] = {
        "driver": g.driver_version,
        "physical": physical,
        "visible": len(visible),
        "CUDA_VISIBLE_DEVICES": cvd,
    }
    if physical == 0:
        return skip(f"driver {g.driver_version} is loaded but reports no GPU: GPU checks skipped")
    if not visible:
        return Finding(
            Status.WARN,
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides {'the' if physical == 1 else 'all'} {plural(physical, 'GPU')}; expected at least one visible",
            cause="CUDA sees no device, so NCCL cannot run; training would fall back to CPU",
            remedy="unset CUDA_VISIBLE_DEVICES, or list valid indices/UUIDs (see `nvidia-smi -L`)",
            observed=observed,
        )
    warned = _selection(g, observed)
    if warned:
        return warned
    selected = f" (CUDA_VISIBLE_DEVICES={cvd} selects {len(visible)} of {physical})" if cvd is not None else ""
    return Finding(
        Status.PASS,
        f"{plural(len(visible), 'GPU')} visible{selected}: {_names(visible)}",
        observed=observed,
        metrics={"gpus_visible": float(len(visible))},
    )


CHECK = Check(name="gpus", title="GPUs (NVML)", facts=GpusFacts, judge=judge, ids={"env": "env.gpus"}, order=100)
