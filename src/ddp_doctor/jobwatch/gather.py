"""Several nodes, one report: node 0 listens on --gather HOST:PORT; every other node sends its report.

Each node's `ddp-doctor run` watches its own ranks. When a node's job ends it sends its Report (JSON,
one length-prefixed message) to node 0, retrying until --gather-timeout; node 0 waits up to the same
timeout after its own job ended and joins the results, tagging each with its node.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import TypedDict

from ddp_doctor import words
from ddp_doctor.jobwatch.config import WatchConfig
from ddp_doctor.report import Report, Result, Status

MAX_MESSAGE = 64 * 1024 * 1024


@dataclass(frozen=True)
class NodeReport:
    """The one message between nodes: a node's rank in the job and its Report."""

    node_rank: int
    report: Report

    def to_json(self) -> bytes:
        return json.dumps({**self.report.to_dict(), "node_rank": self.node_rank}, default=str).encode()

    @classmethod
    def from_json(cls, data: bytes) -> NodeReport:
        """A ValueError saying why for anything that is not a node's report (cut, foreign, another shape)."""
        raw = json.loads(data)
        if not isinstance(raw, dict):
            raise ValueError(f"a node's message is JSON but not an object: {type(raw).__name__}")  # noqa: TRY004
        node_rank = raw.pop("node_rank", None)
        if not isinstance(node_rank, int) or isinstance(node_rank, bool) or node_rank < 0:
            raise ValueError(f"a node's message has node_rank {node_rank!r}, not a node rank")
        try:
            return cls(node_rank, Report.from_dict(raw))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"a node's message is not a report: {exc}") from None


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed early")
        buf += chunk
    return buf


class Server:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.received: list[NodeReport] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="gather", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, cfg: WatchConfig) -> Server:
        assert cfg.gather is not None
        host, _, port = cfg.gather.rpartition(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("0.0.0.0" if host in ("", "*") else host, int(port)))
        sock.listen(64)
        sock.settimeout(0.5)
        return cls(sock)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, addr = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            try:
                conn.settimeout(30)
                (size,) = struct.unpack("!Q", _recv_exact(conn, 8))
                if size > MAX_MESSAGE:
                    raise ValueError(f"message of {size} bytes")
                data = NodeReport.from_json(_recv_exact(conn, size))
                conn.sendall(b"ok")
                with self._lock:
                    self.received.append(data)
            except (OSError, ValueError, ConnectionError) as exc:
                with self._lock:
                    self.errors.append(f"{addr[0]}: {exc}")
            finally:
                conn.close()

    def wait(self, expected: int, timeout_s: float) -> list[NodeReport]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.received) >= expected:
                    break
            time.sleep(0.1)
        with self._lock:
            return list(self.received)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


def send(cfg: WatchConfig, report: Report) -> None:
    assert cfg.gather is not None
    host, _, port = cfg.gather.rpartition(":")
    data = NodeReport(cfg.node_rank, report).to_json()
    deadline = time.monotonic() + cfg.gather_timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=5) as s:
                s.sendall(struct.pack("!Q", len(data)) + data)
                if s.recv(2) == b"ok":
                    report.facts.setdefault("gather", {})["sent_to"] = cfg.gather
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.5)
    report.add(
        Result("run.gather", "Evidence sent to node 0", Status.WARN, f"could not reach node 0 at {cfg.gather}: {last}")
    )


class NodeFacts(TypedDict):
    """One node's part of facts["nodes"] in node 0's report."""

    host: str
    run: object
    """That node's facts["run"], as it sent them."""


def join(report: Report, received: list[NodeReport], nnodes: int) -> None:
    """Add every other node's results (tagged with the node) and facts to node 0's report."""
    host = str(report.target.get("host"))
    for r in report.results:
        r.node = r.node or host
    nodes = {"0": NodeFacts(host=host, run=report.facts.get("run"))}
    for sent in sorted(received, key=lambda d: d.node_rank):
        other = sent.report
        name = str(other.target.get("host"))
        for r in other.results:
            r.node = r.node or name
            report.add(r)
        nodes[str(sent.node_rank)] = NodeFacts(host=name, run=other.facts.get("run"))
    _order_failures(report)
    missing = nnodes - 1 - len(received)
    report.facts["nodes"] = nodes
    report.add(
        Result(
            "run.gather",
            "Every node's evidence",
            Status.WARN if missing else Status.PASS,
            f"{len(received) + 1} of {words.plural(nnodes, 'node')} reported"
            + (f"; {missing} never did" if missing else ""),
            observed={"nodes": sorted(nodes)},
        )
    )
    if report.root_cause is None:
        report.root_cause = report.pick_root_cause()


def _order_failures(report: Report) -> None:
    """Every node names its own first failing rank; across nodes the root is the earliest that is not a
    consequence (a lost peer, a SIGTERM from the launcher). It goes first; the others say they followed it."""
    failures = [r for r in report.results if r.id == "run.failure"]
    if len(failures) < 2:
        return
    failures.sort(key=lambda r: (bool(r.observed.get("consequence")), r.started or float("inf")))
    root = failures[0]
    for r in failures[1:]:
        r.summary += f" [after rank {root.rank} on {root.node} failed]"
    others = [r for r in report.results if r.id != "run.failure"]
    report.results[:] = [others[0], *failures, *others[1:]] if others else failures
    report.root_cause = "run.failure"
