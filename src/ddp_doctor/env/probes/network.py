"""Network interfaces and their addresses from the kernel (ioctl and /proc), no subprocess."""

from __future__ import annotations

import fcntl
import socket
import struct
from pathlib import Path
from typing import Any

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


def interfaces() -> list[dict[str, Any]]:
    v6 = _ipv6()
    result = []
    for _, name in sorted(socket.if_nameindex(), key=lambda x: x[0]):
        state = ""
        try:
            state = Path(f"/sys/class/net/{name}/operstate").read_text().strip()
        except OSError:
            pass
        addresses = [a for a in [_ipv4(name)] if a] + v6.get(name, [])
        result.append(
            {
                "name": name,
                "state": state or "unknown",
                "loopback": name == "lo" or (addresses[:1] and addresses[0].startswith("127.")) or False,
                "addresses": addresses,
            }
        )
    return result
