"""Socket interfaces for NCCL and gloo: does a *_SOCKET_IFNAME value match one, and which to name instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddp_doctor.checks.hostfacts import Interface, NetworkFacts, Route


def ifname_matches(value: str, names: Sequence[str]) -> tuple[bool, str]:
    """NCCL's rules: comma-separated prefixes; '=' makes them exact; '^' excludes (nothing to check)."""
    value = value.strip()
    if value.startswith("^"):
        return True, "exclusion list"
    exact = value.startswith("=")
    entries = [e.strip() for e in value.lstrip("=").split(",") if e.strip()]
    for e in entries:
        if any((n == e) if exact else n.startswith(e) for n in names):
            return True, e
    return False, ",".join(entries)


def usable_ranked(ifaces: Sequence[Interface], route: Route | None, family: str | None = None) -> list[Interface]:
    """Interfaces a *_SOCKET_IFNAME may name: UP (or a virtual one the kernel reports as unknown),
    not loopback, with an address of the wanted family ("AF_INET" / "AF_INET6"); the one carrying
    the route first."""

    def has_family(addr: str) -> bool:
        if addr.lower().startswith("fe80:"):
            return False  # link-local: every UP interface has one, none reaches another node
        return family is None or (":" in addr) == (family == "AF_INET6")

    usable = [
        i for i in ifaces if i.state in ("up", "unknown") and not i.loopback and any(has_family(a) for a in i.addresses)
    ]
    first = route.interface if route else None
    return sorted(usable, key=lambda i: (i.name != first, str(i.name)))


def ifname_remedy(var: str, env: Mapping[str, str], net: NetworkFacts) -> str:
    """Set VAR to an interface that is UP with an address of the right family, the one carrying the
    route to MASTER_ADDR / the rendezvous host (or the default route) first; never a DOWN one."""
    route = net.route
    # NCCL takes IPv4 interfaces first unless NCCL_SOCKET_FAMILY says otherwise; gloo binds the
    # family of the address it resolves, which is the master's family in practice.
    master = str(env.get("MASTER_ADDR") or route.destination or "")
    family = (env.get("NCCL_SOCKET_FAMILY") if var.startswith("NCCL") else None) or (
        "AF_INET6" if ":" in master else "AF_INET"
    )
    ranked = usable_ranked(net.interfaces, route, family)
    if not ranked:
        return f"unset {var}: no interface here is UP with an address" + (f" of family {family}" if family else "")
    best = ranked[0]
    addr = next(iter(best.addresses), "")
    why = f"UP, {addr}" + (f", carries the {route.how}" if route.interface == best.name and route.how else "")
    others = ", ".join(str(i.name) for i in ranked[1:4])
    return f"set {var}={best.name} ({why})" + (f"; also usable: {others}" if others else "") + f", or unset {var}"
