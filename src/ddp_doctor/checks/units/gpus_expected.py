"""Are the GPUs that this machine is meant to have visible to CUDA?"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ddp_doctor.checks import table
from ddp_doctor.checks.facts.gpu_devices import ExpectedGpusFacts
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status
from ddp_doctor.words import plural

NO_GPU_VALUES = ("", "void", "none")
"""NVIDIA_VISIBLE_DEVICES values that mean "no GPU" (the container toolkit's documented values)."""


def evidence(f: ExpectedGpusFacts) -> list[str]:
    """Why this machine is meant to have GPUs (empty: no sign of one)."""
    g, why = f.gpus, []
    if g.physical_count > 0:
        why.append(f"NVML sees {plural(g.physical_count, 'GPU')}")
    if g.numbered_nodes:
        why.append(f"device nodes {', '.join(g.numbered_nodes[:4])}")
    nvd = f.nvidia_visible_devices
    if nvd is not None and nvd.strip().lower() not in NO_GPU_VALUES:
        why.append(f"NVIDIA_VISIBLE_DEVICES={nvd} (set by CUDA base images and the NVIDIA runtime)")
    if f.expect_gpus:
        why.append(f"--expect-gpus {f.expect_gpus}")
    return why


def _listed(cvd: str | None) -> int | None:
    """How many devices CUDA_VISIBLE_DEVICES names (None: unset; 0: empty, or -1 first, hiding all)."""
    if cvd is None:
        return None
    entries = [e.strip() for e in cvd.split(",") if e.strip()]
    return 0 if not entries or entries[0] == "-1" else len(entries)


def _selected(f: ExpectedGpusFacts) -> bool:
    """CUDA_VISIBLE_DEVICES names a subset of the GPUs and CUDA resolved every entry: a deliberate choice
    (Slurm's --gres, a scheduler's or the user's), not GPUs lost."""
    listed = _listed(f.gpus.cuda_visible_devices)
    return bool(listed) and len(f.gpus.visible) == listed


def _wanted(f: ExpectedGpusFacts) -> int:
    if f.expect_gpus:
        return f.expect_gpus
    return len(f.gpus.visible) if _selected(f) else max(f.gpus.physical_count, 1)


@dataclass(frozen=True)
class Shortfall:
    summary: str
    cause: str
    remedy: str


# Why fewer GPUs than wanted are visible: each step returns a Shortfall when it explains it; the
# first that does is the verdict. `shown` is "1 of 2" / "none of the 2"; `why` is evidence(f).
_Why = Callable[[ExpectedGpusFacts, str, list[str]], "Shortfall | None"]


def _hiding_cause(cvd: str) -> str:
    if _listed(cvd) == 0:
        return (
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU from CUDA (an empty value or -1 is how a CPU-only "
            "run is forced), so training here would run on the CPU or fail"
        )
    return (
        "CUDA_VISIBLE_DEVICES names indices or UUIDs that do not exist here (CUDA stops at the first one it "
        "cannot resolve), so training would fall back to the CPU or fail"
    )


def _hidden_by_cvd(f: ExpectedGpusFacts, shown: str, why: list[str]) -> Shortfall | None:
    g = f.gpus
    if not (g.physical_count > len(g.visible) and g.cuda_visible_devices is not None):
        return None
    listed = ", ".join(f"{d.index}: {d.uuid}" for d in g.all[:8])
    return Shortfall(
        summary=f"CUDA_VISIBLE_DEVICES={g.cuda_visible_devices!r} hides the GPUs: {shown} visible to CUDA, "
        f"NVML sees {g.physical_count} ({listed})",
        cause=_hiding_cause(g.cuda_visible_devices),
        remedy="unset CUDA_VISIBLE_DEVICES, or set it to existing indices or UUIDs from `nvidia-smi -L`",
    )


def _too_few_on_node(f: ExpectedGpusFacts, shown: str, why: list[str]) -> Shortfall | None:
    physical = f.gpus.physical_count
    if not (physical >= 1 and f.expect_gpus and physical < f.expect_gpus):
        return None
    return Shortfall(
        summary=f"{shown} expected GPUs are visible: NVML sees only {physical} on this node",
        cause="the node (or the container's device list) has fewer GPUs than the job needs",
        remedy="pass every GPU into the container (--gpus all / nvidia.com/gpu: N), or lower --nproc-per-node",
    )


def _container_without_runtime(f: ExpectedGpusFacts, shown: str, why: list[str]) -> Shortfall | None:
    if not (f.in_container and not f.gpus.driver_loaded):
        return None
    return Shortfall(
        summary=f"GPUs are expected ({'; '.join(why)}) but {shown} visible: the container was started without the GPU runtime"
        + ("" if f.gpus.numbered_nodes else " (no /dev/nvidia* device nodes)"),
        cause="without --gpus all / CDI / runtimeClassName: nvidia the runtime passes in neither the GPU "
        "device nodes nor the driver libraries",
        remedy=table.gpu_runtime().remedy,
    )


def _no_driver(f: ExpectedGpusFacts, shown: str, why: list[str]) -> Shortfall | None:
    if f.gpus.driver_loaded:
        return None
    return Shortfall(
        summary=f"GPUs are expected ({'; '.join(why)}) but {shown} visible: no working NVIDIA driver ({f.gpus.error})",
        cause="the NVIDIA driver is not installed or not loaded (no libnvidia-ml / kernel module)",
        remedy="install the NVIDIA driver (`nvidia-smi` must list the GPUs), then re-run",
    )


def _fewer(f: ExpectedGpusFacts, shown: str, why: list[str]) -> Shortfall | None:
    return Shortfall(
        summary=f"GPUs are expected ({'; '.join(why)}) but {shown} visible to CUDA",
        cause="fewer GPUs than expected are visible",
        remedy="compare `nvidia-smi -L` with the job's needs",
    )


SHORTFALL: tuple[_Why, ...] = (_hidden_by_cvd, _too_few_on_node, _container_without_runtime, _no_driver, _fewer)


def judge(f: ExpectedGpusFacts) -> Finding:
    """Fails when GPUs are meant to be here (NVML sees some, /dev/nvidia* nodes, NVIDIA_VISIBLE_DEVICES
    set, or `--expect-gpus N`) but CUDA sees fewer; a CUDA_VISIBLE_DEVICES whose every entry resolved
    chose its subset (Slurm's --gres sets it so) and is what is expected, unless `--expect-gpus N`
    says more; `--expect-gpus 0` requires none. The cause names the first that explains a shortfall:
    CUDA_VISIBLE_DEVICES hiding them, a node with too few, a container started without the GPU
    runtime, no working driver.

    Skipped on a machine with no sign of a GPU: then the report says GPU training was not verified.
    """
    g, why = f.gpus, evidence(f)
    visible = len(g.visible)
    observed = {
        "evidence": why,
        "nvml_gpus": g.physical_count,
        "visible": visible,
        "CUDA_VISIBLE_DEVICES": g.cuda_visible_devices,
    }
    if f.expect_gpus == 0:
        return Finding(
            Status.SKIP,
            f"--expect-gpus 0: no GPU is required here; CUDA sees {plural(len(g.visible), 'GPU')}"
            + (f" of the {g.physical_count} NVML sees" if g.physical_count else ""),
            observed=observed,
        )
    if not why:
        return Finding(
            Status.SKIP,
            "no GPU on this machine (no NVML device, no /dev/nvidia*, NVIDIA_VISIBLE_DEVICES unset): "
            "GPU training was not verified; only CPU training with gloo can be checked here",
            observed=observed,
        )
    want = _wanted(f)
    if visible >= want:
        expected_n = f" (expected {f.expect_gpus})" if f.expect_gpus else ""
        if _selected(f) and visible < g.physical_count:
            expected_n += f", selected by CUDA_VISIBLE_DEVICES={g.cuda_visible_devices!r} of the {g.physical_count}"
        return Finding(
            Status.PASS, f"{plural(visible, 'GPU')} visible to CUDA{expected_n}; {why[0]}", observed=observed
        )
    shown = f"{visible} of {want}" if visible else f"none of the {want}"
    found = next(r for r in (step(f, shown, why) for step in SHORTFALL) if r is not None)
    return Finding(
        Status.FAIL,
        found.summary,
        cause=found.cause,
        remedy=found.remedy,
        observed=observed,
        expected={"visible": want},
    )


CHECK = Check(
    name="gpus.expected",
    title="GPUs expected are visible",
    facts=ExpectedGpusFacts,
    judge=judge,
    ids={"env": "env.gpus.expected"},
    order=200,
)
