"""Read CUDA's p2pBandwidthLatencyTest tables: GPU pairs whose peer-to-peer copies are much slower than the same
copies through the host. That is what peer-to-peer traffic throttled or bounced by the IOMMU or PCIe ACS looks
like when the copies still complete (when they do not, the output stops: hang.py reads that).

The test prints a connectivity matrix (1: the driver says the pair can use P2P), then bandwidth matrices with
P2P off and on, one row per source GPU (cuda-samples p2pBandwidthLatencyTest.cu). A pair the driver says can use
P2P should copy at least as fast with P2P on; with P2P off the copy goes through host memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddp_doctor.diagnose.catalogue import Signature
from ddp_doctor.diagnose.lines import clean
from ddp_doctor.report import Evidence, Result

BANNER = b"[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]"
"""The test's first line: its tables are read only in a log that holds it."""
SLOWER = 0.5
"""P2P on below this share of P2P off, for a pair the driver says can use P2P: not a measurement's noise."""
MAX_PAIRS_SHOWN = 6

_TITLE = re.compile(
    r"^(?:(?P<conn>P2P Connectivity Matrix)|Unidirectional P2P=(?P<mode>Enabled|Disabled) Bandwidth\b.*Matrix)"
)
_OTHER_TITLE = re.compile(r"^(?:Bidirectional P2P=|P2P=(?:Enabled|Disabled) Latency|\S.*Matrix\b)")
_HEADER = re.compile(r"^(?:D\\D|GPU)(?:\s+\d+)+$")
_ROW = re.compile(r"^(?P<gpu>\d+)(?P<values>(?:\s+\d+(?:\.\d+)?)+)$")


@dataclass(frozen=True)
class SlowPair:
    src: int
    dst: int
    enabled_gbps: float
    disabled_gbps: float
    lineno: int
    line: str


def slow_pairs(tail: list[tuple[int, str]]) -> list[SlowPair]:
    """The pairs the driver says can use P2P whose unidirectional copies are slower with P2P on than off."""
    tables: dict[str, dict[int, tuple[int, str, list[float]]]] = {}
    current: str | None = None
    for lineno, raw in tail:
        text = clean(raw).strip()
        title = _TITLE.match(text)
        if title:
            current = "conn" if title.group("conn") else str(title.group("mode")).lower()
            tables[current] = {}
            continue
        if current is None or _HEADER.match(text):
            continue
        row = _ROW.match(text)
        if row is None or _OTHER_TITLE.match(text):
            current = None
            continue
        tables[current][int(row.group("gpu"))] = (lineno, text, [float(v) for v in row.group("values").split()])
    off, on, conn = tables.get("disabled", {}), tables.get("enabled", {}), tables.get("conn", {})
    out = []
    for src, (lineno, line, values) in sorted(on.items()):
        claimed = conn[src][2] if src in conn else []
        base = off[src][2] if src in off else []
        for dst, enabled in enumerate(values):
            if dst == src or (dst < len(claimed) and claimed[dst] == 0) or dst >= len(base):
                continue
            if base[dst] > 0 and enabled < SLOWER * base[dst]:
                out.append(SlowPair(src, dst, enabled, base[dst], lineno, line))
    return out


def result(sig: Signature, source: str, pairs: list[SlowPair]) -> Result:
    shown = ", ".join(
        f"GPU {p.src} -> {p.dst}: {p.enabled_gbps:g} GB/s with P2P, {p.disabled_gbps:g} GB/s without"
        for p in pairs[:MAX_PAIRS_SHOWN]
    )
    more = f" (and {len(pairs) - MAX_PAIRS_SHOWN} more pairs)" if len(pairs) > MAX_PAIRS_SHOWN else ""
    return Result(
        id=sig.id,
        title=sig.title,
        status=sig.severity,
        summary=f"p2pBandwidthLatencyTest: {shown}{more}; P2P copies should be at least as fast as copies "
        "through the host",
        cause=sig.cause,
        remedy=sig.remedy,
        observed={
            "pairs": [
                {"src": p.src, "dst": p.dst, "p2p_gbps": p.enabled_gbps, "host_gbps": p.disabled_gbps} for p in pairs
            ]
        },
        evidence=[Evidence(source, p.line, p.lineno) for p in {p.lineno: p for p in pairs}.values()][:MAX_PAIRS_SHOWN],
    )
