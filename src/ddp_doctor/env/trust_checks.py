"""Checks that keep the verdict honest about the GPUs and the distributed settings (issue 14):
GPUs expected but not visible, GPUs already busy, NCCL / torch.distributed variables.

Each is a function facts -> Result like the others in env/checks.py (registered there).
"""

from __future__ import annotations

from typing import Any

from ddp_doctor.env import distvars
from ddp_doctor.report import Result, Status
from ddp_doctor.words import plural

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
            f"{plural(len(shown), 'setting')} valid" + (f": {', '.join(shown[:8])}" if shown else " (none set)"),
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
