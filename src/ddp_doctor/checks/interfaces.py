"""Socket interfaces for NCCL and gloo: does a *_SOCKET_IFNAME value match one, and which to name instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ddp_doctor.checks.facts.host import Interface, NetworkFacts, Route


def selected(var: str, value: str, names: Sequence[str]) -> list[str]:
    """The interfaces a *_SOCKET_IFNAME value selects, in `names` order.

    NCCL (NCCL_SOCKET_IFNAME, docs "NCCL_SOCKET_IFNAME"): comma-separated prefixes; a leading '='
    makes them exact names; a leading '^' selects every interface *not* matched. gloo
    (GLOO_SOCKET_IFNAME): torch splits it on ',' and opens each entry as an exact interface name
    (ProcessGroupGloo::createDeviceForInterface), so there are no prefixes and no exclusions.
    """
    items = [item.strip() for item in value.split(",") if item.strip()]
    if var == "GLOO_SOCKET_IFNAME":
        return [n for n in names if n in items]
    exclude = value.strip().startswith("^")
    items = [item.lstrip("^") for item in items]
    exact = bool(items) and items[0].startswith("=")
    items = [item.lstrip("=") for item in items]
    picked = {n for n in names if any(n == i if exact else n.startswith(i) for i in items)}
    return [n for n in names if (n not in picked) == exclude]


def missing(var: str, value: str, names: Sequence[str]) -> list[str]:
    """What makes the value unusable here: for gloo every listed name that does not exist (opening
    it fails); for NCCL the whole value when it selects nothing. Empty: it works here."""
    if var == "GLOO_SOCKET_IFNAME":
        return [i.strip() for i in value.split(",") if i.strip() and i.strip() not in names]
    return [] if selected(var, value, names) else [value.strip()]


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
