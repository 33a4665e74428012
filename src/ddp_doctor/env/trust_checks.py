"""Checks that keep the verdict honest about the GPUs and the distributed settings (issue 14):
GPUs expected but not visible, GPUs already busy, NCCL / torch.distributed variables.

Each is a function facts -> Result like the others in env/checks.py (registered there).
"""

from __future__ import annotations

from typing import Any

from ddp_doctor.env import distvars
from ddp_doctor.report import Result, Status

GiB = 1 << 30
BUSY_MEMORY_BYTES = 2 * GiB
"""Memory an idle GPU shows in use (driver, ECC, a persistence daemon) stays well below this."""
BUSY_UTIL_PCT = 10.0
_NO_GPU_VALUES = ("", "void", "none")
"""NVIDIA_VISIBLE_DEVICES values that mean "no GPU" (the container toolkit's documented values)."""

RUNTIME_REMEDY = """start the container with the GPUs and the NVIDIA runtime:
  docker run --gpus all ...          podman run --device nvidia.com/gpu=all ... (CDI)
  Kubernetes: runtimeClassName: nvidia and resources.limits: {nvidia.com/gpu: N}
  and install nvidia-container-toolkit on the host (`nvidia-ctk runtime configure`)"""


def _section(facts: dict[str, Any], key: str) -> dict[str, Any]:
    value = facts.get(key)
    return value if isinstance(value, dict) else {}


def gpu_evidence(facts: dict[str, Any]) -> list[str]:
    """Why this machine is meant to have GPUs (empty: no sign of one)."""
    g, env = _section(facts, "gpus"), _section(facts, "env")
    why = []
    if int(g.get("physical_count") or 0) > 0:
        why.append(f"NVML sees {g['physical_count']} GPU(s)")
    nodes = [n for n in g.get("device_nodes") or [] if n[len("/dev/nvidia") :].isdigit()]
    if nodes:
        why.append(f"device nodes {', '.join(nodes[:4])}")
    nvd = env.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None and nvd.strip().lower() not in _NO_GPU_VALUES:
        why.append(f"NVIDIA_VISIBLE_DEVICES={nvd} (set by CUDA base images and the NVIDIA runtime)")
    if facts.get("expect_gpus"):
        why.append(f"--expect-gpus {facts['expect_gpus']}")
    return why


def check_gpus_expected(facts: dict[str, Any]) -> Result:
    """GPUs are meant to be here (NVML, /dev/nvidia*, NVIDIA_VISIBLE_DEVICES, --expect-gpus) but CUDA sees fewer."""
    g, c = _section(facts, "gpus"), _section(facts, "container")
    title = "GPUs expected are visible"
    physical, visible = int(g.get("physical_count") or 0), len(g.get("visible") or [])
    expected_n = facts.get("expect_gpus")
    why = gpu_evidence(facts)
    cvd = g.get("cuda_visible_devices")
    observed = {"evidence": why, "nvml_gpus": physical, "visible": visible, "CUDA_VISIBLE_DEVICES": cvd}
    if not why:
        return Result(
            "env.gpus.expected",
            title,
            Status.SKIP,
            "no GPU on this machine (no NVML device, no /dev/nvidia*, NVIDIA_VISIBLE_DEVICES unset): "
            "GPU training was not verified; only CPU training with gloo can be checked here",
            observed=observed,
        )
    want = int(expected_n) if expected_n else max(physical, 1)
    if visible >= want:
        return Result(
            "env.gpus.expected",
            title,
            Status.PASS,
            f"{visible} GPU(s) visible to CUDA" + (f" (expected {expected_n})" if expected_n else "") + f"; {why[0]}",
            observed=observed,
        )
    shown = f"{visible} of {want}" if visible else f"none of the {want}"
    if physical > visible and cvd is not None:
        listed = ", ".join(f"{d.get('index')}: {d.get('uuid')}" for d in (g.get("all") or [])[:8])
        return Result(
            "env.gpus.expected",
            title,
            Status.FAIL,
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides the GPUs: {shown} visible to CUDA, NVML sees {physical} ({listed})",
            cause="CUDA_VISIBLE_DEVICES names indices or UUIDs that do not exist here (CUDA stops at the first "
            "one it cannot resolve), so training would fall back to the CPU or fail",
            remedy="unset CUDA_VISIBLE_DEVICES, or set it to existing indices or UUIDs from `nvidia-smi -L`",
            observed=observed,
            expected={"visible": want},
        )
    if physical >= 1 and expected_n and physical < int(expected_n):
        return Result(
            "env.gpus.expected",
            title,
            Status.FAIL,
            f"{shown} expected GPUs are visible: NVML sees only {physical} on this node",
            cause="the node (or the container's device list) has fewer GPUs than the job needs",
            remedy="pass every GPU into the container (--gpus all / nvidia.com/gpu: N), or lower --nproc-per-node",
            observed=observed,
            expected={"visible": want},
        )
    nodes = [n for n in g.get("device_nodes") or [] if n[len("/dev/nvidia") :].isdigit()]
    if c.get("in_container") and not g.get("driver_loaded"):
        return Result(
            "env.gpus.expected",
            title,
            Status.FAIL,
            f"GPUs are expected ({'; '.join(why)}) but {shown} visible: the container was started without the GPU runtime"
            + ("" if nodes else " (no /dev/nvidia* device nodes)"),
            cause="without --gpus all / CDI / runtimeClassName: nvidia the runtime passes in neither the GPU "
            "device nodes nor the driver libraries",
            remedy=RUNTIME_REMEDY,
            observed=observed,
            expected={"visible": want},
        )
    if not g.get("driver_loaded"):
        return Result(
            "env.gpus.expected",
            title,
            Status.FAIL,
            f"GPUs are expected ({'; '.join(why)}) but {shown} visible: no working NVIDIA driver ({g.get('error')})",
            cause="the NVIDIA driver is not installed or not loaded (no libnvidia-ml / kernel module)",
            remedy="install the NVIDIA driver (`nvidia-smi` must list the GPUs), then re-run",
            observed=observed,
            expected={"visible": want},
        )
    return Result(
        "env.gpus.expected",
        title,
        Status.FAIL,
        f"GPUs are expected ({'; '.join(why)}) but {shown} visible to CUDA",
        cause="fewer GPUs than expected are visible",
        remedy="compare `nvidia-smi -L` with the job's needs",
        observed=observed,
        expected={"visible": want},
    )


def _gib(n: float | None) -> str:
    return f"{(n or 0) / GiB:.1f} GiB"


def others_on_gpus(gpus: dict[str, Any], own_pids: set[int] | None = None) -> list[dict[str, Any]]:
    """Per visible GPU that is in use by someone else: index, name, memory, util, processes."""
    own = own_pids or set()
    busy = []
    for d in gpus.get("visible") or []:
        procs = [p for p in d.get("processes") or [] if p.get("pid") not in own]
        mem, util = d.get("memory_used_bytes"), d.get("util_pct")
        if procs or (mem or 0) >= BUSY_MEMORY_BYTES or (util or 0) >= BUSY_UTIL_PCT:
            busy.append(
                {
                    **{k: d.get(k) for k in ("index", "uuid", "name")},
                    "memory_used_bytes": mem,
                    "util_pct": util,
                    "processes": procs,
                }
            )
    return busy


def describe_busy(entry: dict[str, Any]) -> str:
    procs = entry.get("processes") or []
    who = (
        ", ".join(
            f"pid {p['pid']}"
            + (
                f" ({p['name']}" + (f", container {p['container']}" if p.get("container") else "") + ")"
                if p.get("name")
                else ""
            )
            + (f" holds {_gib(p['used_bytes'])}" if p.get("used_bytes") is not None else "")
            for p in procs[:6]
        )
        or "processes NVML does not list (another container or user)"
    )
    return (
        f"GPU {entry.get('index')} ({entry.get('name')}): {who}; {_gib(entry.get('memory_used_bytes'))} in use, "
        f"utilisation {entry.get('util_pct') if entry.get('util_pct') is not None else '?'}%"
    )


def check_gpus_busy(facts: dict[str, Any]) -> Result:
    """Other processes on the GPUs before the chain starts: the job would share memory and SMs."""
    before = _section(facts, "gpu_baseline") or _section(facts, "gpus")
    title = "GPUs free of other work"
    if not before.get("driver_loaded") or not before.get("visible"):
        return Result("env.gpus.busy", title, Status.SKIP, "no visible GPU to look at")
    busy = others_on_gpus(before)
    observed = {"busy": busy, "when": "before the chain" if facts.get("gpu_baseline") else "now"}
    if not busy:
        return Result(
            "env.gpus.busy",
            title,
            Status.PASS,
            f"no other process on the {len(before['visible'])} visible GPU(s)",
            observed=observed,
        )
    return Result(
        "env.gpus.busy",
        title,
        Status.WARN,
        "GPUs already in use: " + "; ".join(describe_busy(b) for b in busy),
        cause="another job shares these GPUs: training gets less memory and fewer SMs, step times are slower "
        "and uneven, and an out-of-memory error is likely",
        remedy="wait for the other job or pick free GPUs (CUDA_VISIBLE_DEVICES=<free ones>); "
        "see `nvidia-smi --query-compute-apps=pid,used_memory --format=csv`",
        observed=observed,
    )


def check_dist_vars(facts: dict[str, Any]) -> Result:
    env = {str(k): str(v) for k, v in _section(facts, "env").items()}
    title = "NCCL / torch.distributed variables (values)"
    found = distvars.validate(env, facts)
    shown = [k for k in env if k.startswith(distvars.PREFIXES)]
    if not found:
        return Result(
            "env.dist_vars",
            title,
            Status.PASS,
            f"{len(shown)} setting(s) valid" + (f": {', '.join(shown[:8])}" if shown else " (none set)"),
            observed={"checked": shown},
        )
    worst = Status.FAIL if any(f.status == "fail" for f in found) else Status.WARN
    return Result(
        "env.dist_vars",
        title,
        worst,
        "; ".join(f.text for f in found),
        cause="NCCL and torch read these variables at init; an invalid one stops the process group or is "
        "silently ignored, a costly one slows every step",
        remedy="\n".join(dict.fromkeys(f.remedy for f in found)),
        observed={"findings": [{"variable": f.variable, "status": f.status, "source": f.source} for f in found]},
    )


def ifname_remedy(var: str, facts: dict[str, Any]) -> str:
    """Set VAR to an interface that is UP with an address of the right family, the one carrying the
    route to MASTER_ADDR / the rendezvous host (or the default route) first; never a DOWN one."""
    from ddp_doctor.env.probes.network import usable_ranked

    net, env = _section(facts, "network"), _section(facts, "env")
    route = _section(net, "route")
    # NCCL takes IPv4 interfaces first unless NCCL_SOCKET_FAMILY says otherwise; gloo binds the
    # family of the address it resolves, which is the master's family in practice.
    master = str(env.get("MASTER_ADDR") or route.get("destination") or "")
    family = (env.get("NCCL_SOCKET_FAMILY") if var.startswith("NCCL") else None) or (
        "AF_INET6" if ":" in master else "AF_INET"
    )
    ranked = usable_ranked(list(net.get("interfaces") or []), route, family)
    if not ranked:
        return f"unset {var}: no interface here is UP with an address" + (f" of family {family}" if family else "")
    best = ranked[0]
    addr = next(iter(best.get("addresses") or []), "")
    why = f"UP, {addr}" + (
        f", carries the {route['how']}" if route.get("interface") == best["name"] and route.get("how") else ""
    )
    others = ", ".join(str(i["name"]) for i in ranked[1:4])
    return f"set {var}={best['name']} ({why})" + (f"; also usable: {others}" if others else "") + f", or unset {var}"
