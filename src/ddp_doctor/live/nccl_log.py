"""What NCCL_DEBUG=INFO says about the transports it chose, per rank.

Lines seen in NCCL 2.18-2.27 logs (NCCL_DEBUG=INFO):
    host:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
    host:123:456 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [send] via NET/IB/0/GDRDMA
    host:123:456 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
    host:123:456 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>
    host:123:456 [0] NCCL INFO NET/IB : No device found.
    host:123:456 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
    host:123:456 [0] NCCL INFO NCCL version 2.27.3+cuda12.9
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ddp_doctor.rundir.cluster import NcclLogInfo

_VIA = re.compile(r"via (P2P/[\w/]+|SHM/[\w/]+|NET/[\w/]+|COLLNET[\w/]*|NVLS[\w/]*)")
_VERSION = re.compile(r"NCCL version (\S+)")
_IB_USING = re.compile(r"NET/IB\s*:\s*Using\s+(.*?)(?:\s*;|$)")
_IB_NONE = re.compile(r"NET/IB\s*:\s*No device found")
_SOCKET_USING = re.compile(r"NET/Socket\s*:\s*Using\s+(.*)")


def family(transport: str) -> str:
    """P2P/CUMEM/read -> P2P; NET/IB/0/GDRDMA -> NET/IB; NET/Socket/1 -> NET/Socket; SHM/direct -> SHM."""
    parts = transport.split("/")
    return "/".join(parts[:2]) if parts[0] == "NET" else parts[0]


def parse(lines: Iterable[str]) -> NcclLogInfo:
    transports: dict[str, int] = {}
    info = NcclLogInfo(version=None, ib_devices=None, socket_interfaces=None)
    for line in lines:
        if "NCCL" not in line:
            continue
        m = _VIA.search(line)
        if m:
            fam = family(m.group(1))
            transports[fam] = transports.get(fam, 0) + 1
            continue
        if info.get("version") is None and (m := _VERSION.search(line)):
            info["version"] = m.group(1)
        elif m := _IB_USING.search(line):
            info["ib_devices"] = m.group(1).strip()
        elif _IB_NONE.search(line):
            info["ib_devices"] = ""
        elif m := _SOCKET_USING.search(line):
            info["socket_interfaces"] = m.group(1).strip()
    info["transports"] = transports
    return info
