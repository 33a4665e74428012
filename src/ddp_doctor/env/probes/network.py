"""Network interfaces and their addresses from the kernel (ioctl and /proc), no subprocess."""

from __future__ import annotations

import fcntl
import socket
import struct
from pathlib import Path

from ddp_doctor.checks.facts.host import Interface, Route

_SIOCGIFADDR = 0x8915


def _ipv4(name: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def _ipv6() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    try:
        lines = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        if len(parts) < 6:
            continue
        raw = parts[0]
        addr = socket.inet_ntop(socket.AF_INET6, bytes.fromhex(raw))
        found.setdefault(parts[5], []).append(addr)
    return found


def interfaces() -> list[Interface]:
    v6 = _ipv6()
    result = []
    for _, name in sorted(socket.if_nameindex(), key=lambda x: x[0]):
        state = ""
        try:
            state = Path(f"/sys/class/net/{name}/operstate").read_text().strip()
        except OSError:
            pass
        addresses = [a for a in [_ipv4(name)] if a] + v6.get(name, [])
        loopback = name == "lo" or bool(addresses and addresses[0].startswith("127."))
        result.append(Interface(name, state or "unknown", loopback, tuple(addresses)))
    return result


def _default_route_interface() -> str | None:
    """The interface of the IPv4 default route (/proc/net/route: destination and mask 0)."""
    try:
        lines = Path("/proc/net/route").read_text().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) >= 8 and fields[1] == "00000000" and fields[7] == "00000000":
            return fields[0]
    return None


def _route_source(host: str) -> str | None:
    """The source address the kernel would use to reach `host` (a UDP connect sends nothing)."""
    try:
        infos = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        return None
    for family, kind, proto, _, addr in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.connect(addr)
                return str(s.getsockname()[0])
        except OSError:
            continue
    return None


def route(destination: str | None) -> Route:
    """Which interface carries traffic to `destination` (MASTER_ADDR / the rendezvous host), else the
    default route's interface."""
    if destination:
        source = _route_source(destination)
        if source:
            owner = next((i.name for i in interfaces() if source in i.addresses), None)
            if owner:
                return Route(destination, owner, f"route to {destination}", source)
    default = _default_route_interface()
    return Route(None, default, "default route" if default else None, None)
