"""Real "hosts" for multi-node tests: Linux network namespaces on a private bridge.

Layout (everything lives inside namespaces; the machine's own network is never touched):

    <prefix>-sw          the "switch": a bridge `br0` and one veth end per host (`h0`, `h1`, ...)
    <prefix>-h0 .. hN    the "hosts": `lo` and `eth0` (the other veth end) with 10.R.S.(10+i)/24

No namespace has a default route, so traffic can only flow among these namespaces.
Each host also gets its own hostname (a private UTS namespace per command) and an
/etc/hosts (through `ip netns exec`'s /etc/netns/NAME/ convention) naming every host,
like a small cluster with working DNS. `Cluster.close()` kills whatever still runs in
the namespaces, deletes them and the /etc/netns entries; it is idempotent and is
called from a finalizer, so a failing test still tears everything down. Names carry
the creating pid, so leftovers of a killed test run are removed by the next one.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "ddpd"
ETC_NETNS = Path("/etc/netns")
CMD_TIMEOUT_S = 10.0


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=CMD_TIMEOUT_S, check=check)


def available() -> str | None:
    """None when namespaces can be built here, else the reason (for a clean skip)."""
    if os.geteuid() != 0:
        return "needs root for network namespaces"
    if shutil.which("ip") is None:
        return "needs iproute2 (`ip`)"
    if shutil.which("unshare") is None:
        return "needs util-linux (`unshare`)"
    return None


@dataclass(frozen=True)
class Host:
    index: int
    netns: str
    hostname: str
    address: str
    """This host's IPv4 address on the test subnet (on `eth0`)."""
    switch_port: str
    """The veth end on the bridge in the switch namespace; down = cable pulled."""


def _namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_netns_pids(netns: str) -> None:
    pids = _ip("netns", "pids", netns, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def _delete(netns: str) -> None:
    _kill_netns_pids(netns)
    _ip("netns", "del", netns, check=False)
    shutil.rmtree(ETC_NETNS / netns, ignore_errors=True)


def remove_stale() -> None:
    """Delete namespaces left by an earlier test run whose process is gone."""
    for name in _namespaces():
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        try:
            os.kill(pid, 0)
            continue  # that run is still alive
        except ProcessLookupError:
            _delete(name)
        except PermissionError:
            continue


@dataclass
class Cluster:
    hosts: list[Host] = field(default_factory=list)
    switch: str = ""
    _names: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, n: int) -> Cluster:
        remove_stale()
        tag = f"{PREFIX}-{os.getpid()}-{random.randrange(16**4):04x}"
        # 10.R.S.0/24: only ever configured inside our namespaces, so it cannot clash with the machine's routes.
        subnet = f"10.{random.randrange(200, 250)}.{random.randrange(0, 255)}"
        cluster = cls(switch=f"{tag}-sw")
        try:
            cluster._build(tag, subnet, n)
        except BaseException:
            cluster.close()
            raise
        return cluster

    def _build(self, tag: str, subnet: str, n: int) -> None:
        sw = self.switch
        _ip("netns", "add", sw)
        self._names.append(sw)
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "link", "set", "br0", "up")
        for i in range(n):
            netns, port = f"{tag}-h{i}", f"h{i}"
            _ip("netns", "add", netns)
            self._names.append(netns)
            _ip("-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", netns)
            _ip("-n", sw, "link", "set", port, "master", "br0")
            _ip("-n", sw, "link", "set", port, "up")
            address = f"{subnet}.{10 + i}"
            _ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", netns, "link", "set", "eth0", "up")
            _ip("-n", netns, "link", "set", "lo", "up")
            self.hosts.append(Host(i, netns, f"node{i}", address, port))
        hosts_file = "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.hostname}\n" for h in self.hosts)
        for h in self.hosts:
            (ETC_NETNS / h.netns).mkdir(parents=True, exist_ok=True)
            (ETC_NETNS / h.netns / "hosts").write_text(hosts_file)
        self._wait_reachable()

    def _wait_reachable(self, deadline_s: float = 10.0) -> None:
        """Bridge ports start in the 'listening' state; wait until host 0 answers every other host."""
        end = time.monotonic() + deadline_s
        for h in self.hosts[1:]:
            while True:
                ok = self._tcp_probe(h)
                if ok:
                    break
                if time.monotonic() > end:
                    raise RuntimeError(f"test network not up: {h.hostname} cannot reach {self.hosts[0].address}")
                time.sleep(0.2)

    def _tcp_probe(self, h: Host) -> bool:
        # Without ping: a TCP connect to a closed port; "refused" proves the path works.
        code = (
            "import socket,sys\n"
            "s=socket.socket();s.settimeout(1)\n"
            f"try: s.connect(({self.hosts[0].address!r}, 9))\n"
            "except ConnectionRefusedError: sys.exit(0)\n"
            "except OSError: sys.exit(1)\n"
        )
        return (
            subprocess.run(
                ["ip", "netns", "exec", h.netns, sys.executable, "-c", code],
                capture_output=True,
                timeout=CMD_TIMEOUT_S,
                check=False,
            ).returncode
            == 0
        )

    def argv(self, host: Host, argv: Sequence[str]) -> list[str]:
        """argv run inside `host`: its network namespace, its own hostname."""
        return [
            "ip",
            "netns",
            "exec",
            host.netns,
            "unshare",
            "--uts",
            "--",
            "sh",
            "-c",
            f'hostname {host.hostname} && exec "$@"',
            "sh",
            *argv,
        ]

    def popen(
        self, host: Host, argv: Sequence[str], env: Mapping[str, str] | None = None, **kw: object
    ) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(host, argv),
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            **kw,
        )  # type: ignore[call-overload]

    def run(
        self, host: Host, argv: Sequence[str], timeout: float = CMD_TIMEOUT_S, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(host, argv),
            env=dict(env) if env is not None else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def cut(self, host: Host) -> None:
        """Pull the host's cable: its port on the switch goes down."""
        _ip("-n", self.switch, "link", "set", host.switch_port, "down")

    def pids_of(self, host: Host) -> list[int]:
        return [int(p) for p in _ip("netns", "pids", host.netns, check=False).stdout.split()]

    def pids(self) -> list[int]:
        found: list[int] = []
        for name in self._names:
            found += [int(p) for p in _ip("netns", "pids", name, check=False).stdout.split()]
        return found

    def close(self) -> None:
        for name in reversed(self._names):
            _delete(name)
        self._names.clear()
        try:
            ETC_NETNS.rmdir()  # only when empty: another tool's entries stay
        except OSError:
            pass
