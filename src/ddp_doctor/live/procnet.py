"""TCP sockets of this network namespace, read from /proc/net/tcp{,6} (no root, no ss/netstat)."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ESTABLISHED = "01"
LISTEN = "0A"


@dataclass(frozen=True)
class TcpSocket:
    local_port: int
    remote_addr: str
    state: str
    """The kernel's hex state code: "01" ESTABLISHED, "0A" LISTEN, ..."""
    inode: str
    """Matches the `socket:[INODE]` link of the owning process's fd."""


def _hex_addr(text: str) -> str:
    raw = bytes.fromhex(text)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    # /proc/net/tcp6 stores four little-endian 32-bit words.
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    addr = ipaddress.IPv6Address(words)
    return str(addr.ipv4_mapped or addr)


def tcp_sockets() -> Iterator[TcpSocket]:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) < 10:
                continue
            remote_hex, _ = cols[2].rsplit(":", 1)
            yield TcpSocket(int(cols[1].rsplit(":", 1)[1], 16), _hex_addr(remote_hex), cols[3], cols[9])
