"""NCCL RAS (NCCL >= 2.24): ask the job's RAS thread for its status on a hang, and read the answer.

Every NCCL process runs a RAS thread; one of them listens on localhost:28028 (NCCL_RAS_ADDR changes
it, NCCL_RAS_ENABLE=0 turns RAS off). The client protocol is plain text (NCCL's src/ras/client.cc,
protocol 2): send `CLIENT PROTOCOL 2`, read `SERVER PROTOCOL N`; send `TIMEOUT S`, read `OK`; send
`STATUS`, read the report until the server closes the connection. The report is text for people:
a job summary, a table of communicator groups (Status, Errors), then Errors / Warnings sections that
name dead processes (`DEAD`), processes and ranks that sent no data (`INCOMPLETE`) and ranks whose
collective counts differ (`MISMATCH`). Its format is described in NCCL's user guide (troubleshooting/ras)
and "varies from release to release", so the parser reads what it recognises and keeps the text.

Everything here has a deadline: a hang must not be made worse by waiting on RAS.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ddp_doctor import words
from ddp_doctor.live import procnet

DEFAULT_ADDR = "localhost:28028"
CLIENT_PROTOCOL = 2
RAS_TIMEOUT_S = 5
"""What the RAS thread may wait for other processes (ncclras's default, RAS_COLLECTIVE_LEG_TIMEOUT_SEC)."""
DEADLINE_S = 15.0
"""The whole query: connect, handshake, RAS's own timeout and the answer."""
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class RasProcess:
    pid: int
    node: str
    gpu: str


@dataclass(frozen=True)
class RasRank:
    rank: int
    pid: int | None = None
    node: str | None = None
    gpu: str | None = None


@dataclass(frozen=True)
class RasMismatch:
    comm: str
    """'#0-0 (fa93daea854b060b)'."""
    what: str
    """'Communicator ranks have different AllGather operation counts'."""
    counts: tuple[tuple[int, int], ...]
    """(ranks, launched up to operation N), as RAS groups them."""
    listed: tuple[RasRank, ...]
    """The ranks RAS prints one by one: the outlier (smaller) group."""


@dataclass(frozen=True)
class RasGroup:
    group: int
    comms: int
    ranks_per_comm: str
    status: str
    errors: str


@dataclass(frozen=True)
class RasReport:
    text: str
    nccl_version: str | None = None
    groups: tuple[RasGroup, ...] = ()
    dead: tuple[RasProcess, ...] = ()
    missing_processes: tuple[RasProcess, ...] = ()
    missing_ranks: dict[str, tuple[RasRank, ...]] = field(default_factory=dict)
    """communicator -> the ranks it has no data from."""
    mismatches: tuple[RasMismatch, ...] = ()
    timeouts: int = 0
    no_communicators: bool = False


@dataclass(frozen=True)
class RasAnswer:
    addr: str
    report: RasReport | None
    why_not: str = ""
    """Why there is no report (RAS off, not listening, timed out), for the evidence."""
    seconds: float = 0.0


# ---- the query -----------------------------------------------------------------------------


def address(env: Mapping[str, str]) -> tuple[str, int, str]:
    """(host, port, 'host:port') from NCCL_RAS_ADDR as the job sees it, else NCCL's default."""
    raw = env.get("NCCL_RAS_ADDR") or DEFAULT_ADDR
    host, _, port = raw.rpartition(":")
    host = host.strip("[]") or "localhost"
    return host, int(port) if port.isdigit() else 28028, raw


def disabled(env: Mapping[str, str]) -> bool:
    return env.get("NCCL_RAS_ENABLE", "").strip() == "0"


def _listening_inodes(port: int) -> set[str]:
    """Socket inodes listening on this TCP port in our network namespace (/proc/net/tcp and tcp6)."""
    return {s.inode for s in procnet.tcp_sockets() if s.state == procnet.LISTEN and s.local_port == port}


def listener(port: int, pids: Iterable[int]) -> tuple[bool, int | None]:
    """(something listens on the port, the pid among `pids` that owns that socket, if one does).

    NCCL's RAS thread listens in one of the job's processes; a listener that is none of them is
    another job's RAS, whose answer would be about the wrong job.
    """
    inodes = _listening_inodes(port)
    if not inodes:
        return False, None
    wanted = {f"socket:[{i}]" for i in inodes}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                    return True, pid
            except OSError:
                continue
    return True, None


def ask(env: Mapping[str, str], job_pids: Iterable[int], deadline_s: float = DEADLINE_S) -> RasAnswer:
    """Query RAS only where the listener is one of the job's own processes (a local address)."""
    host, port, addr = address(env)
    if disabled(env):
        return RasAnswer(addr, None, "RAS is switched off in this job (NCCL_RAS_ENABLE=0)")
    if host in ("localhost", "127.0.0.1", "::1"):
        listening, owner = listener(port, job_pids)
        if not listening:
            return RasAnswer(
                addr,
                None,
                f"nothing listens on {addr}: no NCCL >= 2.24 communicator in this job on this node "
                "(a gloo job, an older NCCL, or RAS off)",
            )
        if owner is None:
            return RasAnswer(addr, None, f"{addr} belongs to a process outside this job (another job's RAS): not asked")
    return query(env, deadline_s)


def query(env: Mapping[str, str], deadline_s: float = DEADLINE_S) -> RasAnswer:
    host, port, addr = address(env)
    if disabled(env):
        return RasAnswer(addr, None, "RAS is switched off in this job (NCCL_RAS_ENABLE=0)")
    t0 = time.monotonic()
    end = t0 + deadline_s

    def left() -> float:
        return max(0.05, end - time.monotonic())

    try:
        with socket.create_connection((host, port), timeout=min(2.0, left())) as sock:
            lines = _Lines(sock, end)
            sock.sendall(f"CLIENT PROTOCOL {CLIENT_PROTOCOL}\n".encode())
            hello = lines.readline()
            if not hello.upper().startswith("SERVER PROTOCOL"):
                return RasAnswer(addr, None, f"{addr} answered {hello.strip()[:80]!r}, not NCCL RAS", _since(t0))
            sock.sendall(f"TIMEOUT {RAS_TIMEOUT_S}\n".encode())
            ok = lines.readline()
            if ok.strip().upper() != "OK":
                return RasAnswer(addr, None, f"RAS refused TIMEOUT: {ok.strip()[:80]!r}", _since(t0))
            sock.sendall(b"STATUS\n")
            text = lines.rest()
    except TimeoutError:
        return RasAnswer(addr, None, f"RAS at {addr} did not answer within {deadline_s:.0f} s", _since(t0))
    except ConnectionRefusedError:
        return RasAnswer(
            addr,
            None,
            f"nothing listens on {addr}: no NCCL >= 2.24 communicator in this job on this node "
            "(a gloo job, an older NCCL, or RAS off)",
            _since(t0),
        )
    except OSError as exc:
        return RasAnswer(addr, None, f"RAS at {addr}: {exc.strerror or exc}", _since(t0))
    if not text.strip():
        return RasAnswer(addr, None, f"RAS at {addr} closed the connection without a report", _since(t0))
    return RasAnswer(addr, parse(text), "", _since(t0))


def _since(t0: float) -> float:
    return round(time.monotonic() - t0, 2)


class _Lines:
    """Reads a socket line by line and to its end, every read under one deadline."""

    def __init__(self, sock: socket.socket, end: float) -> None:
        self.sock = sock
        self.end = end
        self.buf = b""

    def _recv(self) -> bytes:
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        self.sock.settimeout(remaining)
        return self.sock.recv(65536)

    def readline(self) -> str:
        while b"\n" not in self.buf and len(self.buf) < MAX_BYTES:
            chunk = self._recv()
            if not chunk:
                break
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("utf-8", "replace")

    def rest(self) -> str:
        while len(self.buf) < MAX_BYTES:
            chunk = self._recv()
            if not chunk:
                break
            self.buf += chunk
        return self.buf.decode("utf-8", "replace")


# ---- the answer ----------------------------------------------------------------------------

_VERSION = re.compile(r"^NCCL version (\S+)", re.MULTILINE)
_GROUP = re.compile(
    r"^\s*(?P<group>\d+)\s+(?P<comms>\d+)\s+(?P<nodes>\S+)\s+(?P<per_node>\S+)\s+(?P<per_comm>\S+)\s+"
    r"(?P<in_group>\S+)\s+(?P<status>[A-Z]+)\s+(?P<errors>[A-Z,]+)\s*$"
)
_PROCESS = re.compile(r"^\s*Process (?P<pid>\d+) on node (?P<node>\S+) managing GPUs? (?P<gpu>[\d,\s]+?)\s*$")
_RANK = re.compile(r"^\s*Rank (?P<rank>\d+) -- GPU (?P<gpu>\S+) managed by process (?P<pid>\d+) on node (?P<node>\S+)")
_MISSING_RANKS = re.compile(r"^\s*The missing ranks?: (?P<ranks>[\d,\s-]+)$")
_COMM = re.compile(r"^(?P<comm>#\d+-\d+ \([0-9a-f]+\)) (?P<errors>[A-Z,]+)\s*$")
_COUNT = re.compile(r"^\s*(?P<n>\d+) ranks? (?:have|has) launched up to operation (?P<op>\d+)")
_TIMEOUTS = re.compile(r"Encountered (?P<n>\d+) communication timeouts?")


def _ranks_list(text: str) -> list[int]:
    out: list[int] = []
    for part in text.replace(" ", "").split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            out.extend(range(int(lo), int(hi) + 1) if hi.isdigit() else [int(lo)])
    return out


def parse(text: str) -> RasReport:  # long: one pass over the lines; the block being read is state every branch shares
    """What RAS's text report says: groups, dead and missing processes, missing ranks, count mismatches."""
    groups: list[RasGroup] = []
    dead: list[RasProcess] = []
    missing_procs: list[RasProcess] = []
    missing_ranks: dict[str, list[RasRank]] = {}
    mismatches: list[RasMismatch] = []
    block: str | None = None
    """DEAD | INCOMPLETE (job-level) | a communicator '#x-y (hash)' | None."""
    comm_errors = ""
    what = ""
    counts: list[tuple[int, int]] = []
    listed: list[RasRank] = []
    timeouts = 0

    def close_comm() -> None:
        nonlocal what, counts, listed
        if block and block.startswith("#") and "MISMATCH" in comm_errors and (counts or what):
            mismatches.append(RasMismatch(block, what, tuple(counts), tuple(listed)))
        what, counts, listed = "", [], []

    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        g = _GROUP.match(line)
        if g and block is None:
            groups.append(RasGroup(int(g["group"]), int(g["comms"]), g["per_comm"], g["status"], g["errors"]))
            continue
        if stripped in ("DEAD", "INCOMPLETE") and not line.startswith(" " * 4):
            close_comm()
            block = stripped
            continue
        c = _COMM.match(stripped)
        if c:
            close_comm()
            block, comm_errors = c["comm"], c["errors"]
            continue
        if stripped in ("Errors", "Warnings", "TIMEOUT") or stripped.startswith(("====", "Communicators")):
            close_comm()
            block = None if stripped != "TIMEOUT" else "TIMEOUT"
            continue
        t = _TIMEOUTS.search(stripped)
        if t:
            timeouts += int(t["n"])
            continue
        p = _PROCESS.match(line)
        if p and block in ("DEAD", "INCOMPLETE"):
            proc = RasProcess(int(p["pid"]), p["node"], p["gpu"].strip())
            (dead if block == "DEAD" else missing_procs).append(proc)
            continue
        if block is None or not block.startswith("#"):
            continue
        r = _RANK.match(line)
        m = _MISSING_RANKS.match(line)
        n = _COUNT.match(line)
        rank = RasRank(int(r["rank"]), int(r["pid"]), r["node"], r["gpu"]) if r else None
        if "INCOMPLETE" in comm_errors and (m or (rank and not counts)):
            found = [RasRank(x) for x in _ranks_list(m["ranks"])] if m else [rank] if rank else []
            missing_ranks.setdefault(block, []).extend(found)
        elif n:
            counts.append((int(n["n"]), int(n["op"])))
        elif rank is not None:
            listed.append(rank)
        elif stripped.startswith("Communicator ranks have different"):
            what = stripped
    close_comm()
    version = _VERSION.search(text)
    return RasReport(
        text=text,
        nccl_version=version.group(1) if version else None,
        groups=tuple(groups),
        dead=tuple(dead),
        missing_processes=tuple(missing_procs),
        missing_ranks={k: tuple(v) for k, v in missing_ranks.items()},
        mismatches=tuple(mismatches),
        timeouts=timeouts,
        no_communicators="No communicator data collected" in text,
    )


def _who(pid: int | None, ranks_by_pid: Mapping[int, int]) -> str:
    return f" = rank {ranks_by_pid[pid]} here" if pid is not None and pid in ranks_by_pid else ""


def findings(report: RasReport, ranks_by_pid: Mapping[int, int]) -> list[str]:
    """One line per thing RAS says is wrong, with our rank where its process is one of ours."""
    out: list[str] = []
    for proc in report.dead:
        out.append(
            f"DEAD: process {proc.pid} on node {proc.node} (GPU {proc.gpu}){_who(proc.pid, ranks_by_pid)} "
            "is considered dead (unreachable via the RAS network)"
        )
    for proc in report.missing_processes:
        out.append(
            f"INCOMPLETE: no data from process {proc.pid} on node {proc.node} (GPU {proc.gpu})"
            f"{_who(proc.pid, ranks_by_pid)}: unresponsive (stopped, hung or dying)"
        )
    for comm, ranks in report.missing_ranks.items():
        names = ", ".join(
            f"rank {r.rank}" + (f" (process {r.pid} on {r.node}{_who(r.pid, ranks_by_pid)})" if r.pid else "")
            for r in ranks
        )
        out.append(f"INCOMPLETE: communicator {comm} has no data from {names}")
    for mm in report.mismatches:
        counts = ", ".join(f"{words.plural(n, 'rank')} launched up to operation {op}" for n, op in mm.counts)
        listed = ", ".join(f"rank {r.rank} (process {r.pid} on {r.node}{_who(r.pid, ranks_by_pid)})" for r in mm.listed)
        out.append(
            f"MISMATCH: communicator {mm.comm}: {mm.what.removeprefix('Communicator ranks have ') or 'counts differ'}"
            + (f": {counts}" if counts else "")
            + (f"; the smaller group: {listed}" if listed else "")
        )
    if report.timeouts:
        out.append(f"TIMEOUT: RAS hit {words.plural(report.timeouts, 'communication timeout')} gathering the data")
    return out


def headline(answer: RasAnswer, ranks_by_pid: Mapping[int, int]) -> str:
    """The evidence line: what RAS said, or why it could not be asked."""
    if answer.report is None:
        return f"unavailable: {answer.why_not}"
    rep = answer.report
    found = findings(rep, ranks_by_pid)
    version = f"NCCL {rep.nccl_version} " if rep.nccl_version else ""
    if found:
        return f"{version}RAS at {answer.addr} ({answer.seconds:.1f} s): " + "; ".join(found)
    if rep.no_communicators:
        return f"{version}RAS at {answer.addr}: no communicator data collected"
    states = ", ".join(sorted({f"{g.status} {g.errors}" for g in rep.groups})) or "no communicator table"
    return (
        f"{version}RAS at {answer.addr} ({answer.seconds:.1f} s): every process answered, "
        f"communicators {states}: NCCL sees no dead or missing peer"
    )
