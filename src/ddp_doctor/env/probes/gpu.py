"""GPUs and the driver through NVML (nvidia-ml-py). NVML never creates a CUDA context, so the
parent can ask it directly; no driver is a fact ("driver_loaded": False), not an error."""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import Any, TypedDict


# What the probe writes into facts["gpus"] (the report's JSON; checks/facts reads it).
class GpuProcessJson(TypedDict):
    pid: int
    used_bytes: int | None
    name: str | None
    container: str | None
    """The container id (12 hex digits) the process runs in, from its cgroup."""


class ProcessOwner(TypedDict):
    name: str | None
    container: str | None


class GpuUsage(TypedDict):
    memory_used_bytes: int | None
    util_pct: float | None
    processes: list[GpuProcessJson] | None
    """None when NVML would not say."""


class GpuDeviceJson(GpuUsage):
    index: int
    name: str
    uuid: str
    memory_bytes: int | None
    compute_capability: str | None
    mig_mode: str
    pci_bus_id: str | None
    nvlinks_active: int | None


class GpuPairJson(TypedDict):
    a: int
    b: int
    p2p_read: str | None
    p2p_nvlink: str | None
    path: str | None
    """How the two are connected (NVML's topology level, in words)."""


class GpuProbe(TypedDict, total=False):
    driver_loaded: bool
    driver_version: str | None
    cuda_driver_version: str | None
    count: int
    physical_count: int
    visible: list[GpuDeviceJson]
    all: list[GpuDeviceJson]
    cuda_visible_devices: str | None
    error: str | None
    device_nodes: list[str]
    topology: list[GpuPairJson]
    nvml_missing: bool


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _cuda_version(code: int) -> str:
    """NVML's 12040 -> '12.4'."""
    return f"{code // 1000}.{code % 1000 // 10}"


def device_nodes() -> list[str]:
    return sorted(glob.glob("/dev/nvidia[0-9]*") + glob.glob("/dev/nvidiactl") + glob.glob("/dev/nvidia-uvm"))


def apply_visible(devices: list[GpuDeviceJson], spec: str | None) -> list[GpuDeviceJson]:
    """The devices CUDA would expose under CUDA_VISIBLE_DEVICES (indices or UUID prefixes).

    CUDA stops at the first entry it cannot resolve, and an empty value hides every GPU.
    """
    if spec is None:
        return list(devices)
    chosen: list[GpuDeviceJson] = []
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            break
        match = None
        if entry.lstrip("-").isdigit():
            idx = int(entry)
            match = next((d for d in devices if d["index"] == idx), None) if idx >= 0 else None
        else:
            uuid = entry if entry.startswith(("GPU-", "MIG-")) else f"GPU-{entry}"
            match = next((d for d in devices if str(d.get("uuid", "")).startswith(uuid)), None)
        if match is None or match in chosen:
            break
        chosen.append(match)
    return chosen


def _optional(fn: Any, *args: Any) -> Any:
    import pynvml

    try:
        return fn(*args)
    except pynvml.NVMLError:
        return None


def _topology(pynvml: Any, handles: list[Any], devices: list[GpuDeviceJson]) -> list[GpuPairJson]:
    levels = {
        getattr(pynvml, "NVML_TOPOLOGY_INTERNAL", 0): "same board",
        getattr(pynvml, "NVML_TOPOLOGY_SINGLE", 10): "one PCIe switch",
        getattr(pynvml, "NVML_TOPOLOGY_MULTIPLE", 20): "several PCIe switches",
        getattr(pynvml, "NVML_TOPOLOGY_HOSTBRIDGE", 30): "PCIe host bridge",
        getattr(pynvml, "NVML_TOPOLOGY_NODE", 40): "same NUMA node, across host bridges",
        getattr(pynvml, "NVML_TOPOLOGY_SYSTEM", 50): "across NUMA nodes (SMP interconnect)",
    }
    statuses = {
        0: "ok",
        1: "chipset not supported",
        2: "GPU not supported",
        3: "IOH topology not supported",
        4: "disabled by driver",
        5: "not supported",
        6: "unknown",
    }
    pairs = []
    for i in range(len(handles)):
        for j in range(i + 1, len(handles)):
            a, b = handles[i], handles[j]
            read = _optional(pynvml.nvmlDeviceGetP2PStatus, a, b, pynvml.NVML_P2P_CAPS_INDEX_READ)
            nvlink = _optional(pynvml.nvmlDeviceGetP2PStatus, a, b, pynvml.NVML_P2P_CAPS_INDEX_NVLINK)
            level = _optional(pynvml.nvmlDeviceGetTopologyCommonAncestor, a, b)
            pairs.append(
                GpuPairJson(
                    a=devices[i]["index"],
                    b=devices[j]["index"],
                    p2p_read=statuses.get(read, str(read)) if read is not None else None,
                    p2p_nvlink=statuses.get(nvlink, str(nvlink)) if nvlink is not None else None,
                    path=levels.get(level, str(level)) if level is not None else None,
                )
            )
    return pairs


def _nvlink_count(pynvml: Any, handle: Any) -> int | None:
    links = getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)
    active = 0
    for link in range(links):
        try:
            if pynvml.nvmlDeviceGetNvLinkState(handle, link) == pynvml.NVML_FEATURE_ENABLED:
                active += 1
        except pynvml.NVMLError:
            if link == 0:
                return None  # no NVLink on this device
            break
    return active


def _process(pid: int) -> ProcessOwner:
    """Name and container of a pid, when this pid namespace can see it (NVML reports host pids)."""
    info = ProcessOwner(name=None, container=None)
    try:
        info["name"] = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8").strip() or None
        cgroup = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8")
    except OSError:
        return info
    m = re.search(r"(?:docker|libpod|cri-containerd|crio)[-/]([0-9a-f]{12,64})", cgroup)
    info["container"] = m.group(1)[:12] if m else None
    return info


def usage(pynvml: Any, handle: Any) -> GpuUsage:
    """What is on the GPU right now: memory in use, utilisation, and the compute processes holding it."""
    mem = _optional(pynvml.nvmlDeviceGetMemoryInfo, handle)
    util = _optional(pynvml.nvmlDeviceGetUtilizationRates, handle)
    getter = (
        getattr(pynvml, "nvmlDeviceGetComputeRunningProcesses_v3", None) or pynvml.nvmlDeviceGetComputeRunningProcesses
    )
    procs = _optional(getter, handle)
    return GpuUsage(
        memory_used_bytes=int(mem.used) if mem is not None else None,
        util_pct=float(util.gpu) if util is not None else None,
        processes=None if procs is None else [_gpu_process(p) for p in procs],
    )


def _gpu_process(p: Any) -> GpuProcessJson:
    owner = _process(int(p.pid))
    return GpuProcessJson(
        pid=int(p.pid),
        # NVML reports None (NVML_VALUE_NOT_AVAILABLE) without the rights to see it.
        used_bytes=int(p.usedGpuMemory) if isinstance(getattr(p, "usedGpuMemory", None), int) else None,
        name=owner["name"],
        container=owner["container"],
    )


def _device(pynvml: Any, i: int, h: Any) -> GpuDeviceJson:
    cc = _optional(pynvml.nvmlDeviceGetCudaComputeCapability, h)
    mig = _optional(pynvml.nvmlDeviceGetMigMode, h)
    mem = _optional(pynvml.nvmlDeviceGetMemoryInfo, h)
    pci = _optional(pynvml.nvmlDeviceGetPciInfo, h)
    return GpuDeviceJson(
        index=i,
        name=_text(pynvml.nvmlDeviceGetName(h)),
        uuid=_text(pynvml.nvmlDeviceGetUUID(h)),
        memory_bytes=int(mem.total) if mem is not None else None,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc else None,
        mig_mode=("enabled" if mig[0] else "disabled") if mig else "not supported",
        pci_bus_id=_text(pci.busId) if pci is not None else None,
        nvlinks_active=_nvlink_count(pynvml, h),
        **usage(pynvml, h),
    )


def nothing_seen(cuda_visible_devices: str | None, error: str | None = None) -> GpuProbe:
    """The GPU facts before NVML answers (or when it never does): no driver, no device."""
    return GpuProbe(
        driver_loaded=False,
        driver_version=None,
        cuda_driver_version=None,
        count=0,
        physical_count=0,
        visible=[],
        all=[],
        cuda_visible_devices=cuda_visible_devices,
        error=error,
        device_nodes=device_nodes(),
        topology=[],
    )


def probe() -> GpuProbe:
    facts = nothing_seen(os.environ.get("CUDA_VISIBLE_DEVICES"))
    try:
        import pynvml
    except ImportError as exc:
        facts["error"] = f"nvidia-ml-py is not installed ({exc}); reinstall ddp-doctor"
        facts["nvml_missing"] = True
        return facts
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        facts["error"] = f"NVML could not start: {_text(exc)}"
        return facts
    try:
        facts["driver_loaded"] = True
        facts["driver_version"] = _text(pynvml.nvmlSystemGetDriverVersion())
        code = _optional(getattr(pynvml, "nvmlSystemGetCudaDriverVersion_v2", pynvml.nvmlSystemGetCudaDriverVersion))
        facts["cuda_driver_version"] = _cuda_version(code) if code else None
        handles = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handles.append(pynvml.nvmlDeviceGetHandleByIndex(i))
            facts["all"].append(_device(pynvml, i, handles[-1]))
        facts["physical_count"] = len(facts["all"])
        facts["visible"] = apply_visible(facts["all"], facts["cuda_visible_devices"])
        facts["count"] = len(facts["visible"])
        if len(handles) >= 2:
            visible_idx = {d["index"] for d in facts["visible"]}
            kept = [(h, d) for h, d in zip(handles, facts["all"]) if d["index"] in visible_idx]
            facts["topology"] = _topology(pynvml, [h for h, _ in kept], [d for _, d in kept])
    except pynvml.NVMLError as exc:
        facts["error"] = f"NVML query failed: {_text(exc)}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
    return facts
