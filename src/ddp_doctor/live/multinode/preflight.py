"""Node-level checks before torchrun is started on one node of a multi-node run.

Two things break multi-node jobs before any rank runs, and torchrun reports both only
after long timeouts: the c10d rendezvous endpoint cannot be reached (or, on node 0, which
hosts the c10d store, cannot be bound), and the socket interface gloo/NCCL would use does
not exist, has no address, or is the loopback. Each probe here has a short deadline and
returns a Result; nothing prints. No torch import.
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import socket
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddp_doctor.checks.interfaces import selected as select_interfaces
from ddp_doctor.errors import UsageError
from ddp_doctor.report import Result, Status

ENDPOINT_ID = "multinode.rdzv_endpoint"
IFNAME_ID = "multinode.socket_ifname"
IFNAME_TITLE = "socket interface for the process group"
DEFAULT_C10D_PORT = 29400  # torchrun's default for --rdzv-endpoint without a port
RESOLVE_TIMEOUT_S = 5.0
CONNECT_ATTEMPT_S = 1.0
IFNAME_VARS = {"gloo": "GLOO_SOCKET_IFNAME", "nccl": "NCCL_SOCKET_IFNAME"}
_SIOCGIFADDR = 0x8915


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    """HOST:PORT, [V6]:PORT or HOST (port 29400, as torchrun does)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, ""
    if not host:
        raise UsageError(f"--rdzv-endpoint {text!r} has no host; expected HOST:PORT, e.g. node0:29400")
    if not port_text:
        return Endpoint(host, DEFAULT_C10D_PORT)
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise UsageError(f"--rdzv-endpoint {text!r}: port {port_text!r} is not a number in 1..65535")
    return Endpoint(host, int(port_text))


# -- interfaces of this node ---------------------------------------------------------------


def interface_addresses() -> dict[str, list[str]]:
    """Every interface of this network namespace and its addresses (IPv4 via ioctl, IPv6 from /proc)."""
    found: dict[str, list[str]] = {name: [] for _, name in socket.if_nameindex()}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for name, addrs in found.items():
            try:
                packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
                addrs.append(socket.inet_ntoa(packed[20:24]))
            except OSError:
                pass  # no IPv4 address
    try:
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 6 and fields[5] in found and fields[3] != "20":  # scope 0x20 = link-local
                found[fields[5]].append(str(ipaddress.IPv6Address(bytes.fromhex(fields[0]))))
    except OSError:
        pass
    return found


def is_up(name: str) -> bool | None:
    try:
        flags = int(Path(f"/sys/class/net/{name}/flags").read_text().strip(), 16)
    except (OSError, ValueError):
        return None
    return bool(flags & 0x1)  # IFF_UP


def route_source(address: str) -> str | None:
    """The local address the kernel would send from to reach `address` (a UDP connect sends nothing)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((address, 9))
            return str(s.getsockname()[0])
    except OSError:
        return None


def interface_of(address: str, addresses: Mapping[str, list[str]]) -> str | None:
    return next((name for name, addrs in addresses.items() if address in addrs), None)


def match_ifname(spec: str, names: list[str], var: str) -> list[str]:
    """The interfaces a *_SOCKET_IFNAME value selects (checks.interfaces.selected: NCCL prefixes,
    '^' excludes, '=' exact; gloo exact names), the same answer `check --static` gives."""
    return select_interfaces(var, spec, names)


# -- the rendezvous endpoint ----------------------------------------------------------------


def _resolve(host: str, port: int, timeout_s: float) -> tuple[list[str], str | None]:
    """getaddrinfo under a deadline (it can block for long on a broken resolver)."""
    addrs: list[str] = []
    errors: list[str] = []

    def work() -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            addrs.extend(dict.fromkeys(str(info[4][0]) for info in infos))
        except (socket.gaierror, UnicodeError) as exc:
            errors.append(str(exc))

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        return [], f"name resolution did not answer within {timeout_s:.0f} s"
    return addrs, (errors[0] if errors else None)


_CONNECT_ERRORS = {
    errno.ETIMEDOUT: "timed out (packets dropped: a firewall, a wrong address, or the link is down)",
    errno.ECONNREFUSED: "connection refused (the host answers, but nothing listens on that port yet: "
    "node 0 not started, or its store uses another port)",
    errno.EHOSTUNREACH: "no route to host (no answer on the local network: wrong address or host down)",
    errno.ENETUNREACH: "network unreachable (this node has no route to that network)",
}


def connect_errno(address: str, port: int, timeout_s: float) -> int:
    """0 when a TCP connect is accepted, else its errno (ETIMEDOUT when it got no answer in time)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        try:
            s.connect((address, port))
            return 0
        except TimeoutError:
            return errno.ETIMEDOUT
        except OSError as exc:
            return exc.errno or errno.EIO


def _connect_error(address: str, port: int, timeout_s: float) -> str | None:
    code = connect_errno(address, port, timeout_s)
    return None if code == 0 else _CONNECT_ERRORS.get(code, os.strerror(code))


def _bind_error(address: str, port: int) -> int | None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore does: TIME_WAIT is not "in use"
        try:
            s.bind((address, port))
            s.listen(1)
            return None
        except OSError as exc:
            return exc.errno or -1


def _is_local(addresses: list[str]) -> bool:
    local = {a for addrs in interface_addresses().values() for a in addrs}
    return any(a in local or ipaddress.ip_address(a).is_loopback for a in addresses)


def _endpoint_result(status: Status, summary: str, node: str | None, started: float | None, **kw: Any) -> Result:
    # A failure carries when it was seen (the root cause is the earliest); a pass does not.
    return Result(
        ENDPOINT_ID, "c10d rendezvous endpoint", status, summary, node=node, phase="preflight", started=started, **kw
    )


def _resolve_until(endpoint: Endpoint, wait_s: float, deadline: float) -> tuple[list[str], str | None]:
    """The endpoint's addresses, asked again until the deadline: DNS for node 0 may appear late (a
    Kubernetes headless Service lists ready pods only)."""
    while True:
        addrs, error = _resolve(endpoint.host, endpoint.port, min(RESOLVE_TIMEOUT_S, max(wait_s, 1.0)))
        if addrs or time.monotonic() >= deadline:
            return addrs, error
        time.sleep(0.5)


def _host_store(
    endpoint: Endpoint,
    addrs: list[str],
    node_rank: int | None,
    observed: dict[str, object],
    node: str | None,
    started: float,
) -> Result | None:
    """Node 0's answer: the store's port binds here, or why not; None when an elastic node finds the port
    taken (another agent here may host the store) and should connect as a client instead."""
    code = _bind_error(addrs[0], endpoint.port)
    host = {**observed, "role": "store host"}
    if code is None:
        summary = f"this node hosts the c10d store: {endpoint} ({addrs[0]}) is a local address and the port is free"
        return _endpoint_result(Status.PASS, summary, node, None, observed=host)
    if code == errno.EADDRINUSE and node_rank is None:
        return None
    if code == errno.EADDRINUSE:
        return _endpoint_result(
            Status.FAIL,
            f"port {endpoint.port} on {addrs[0]} is already in use; node 0 must bind it to host the c10d store",
            node,
            started,
            cause="another process (an earlier run that is still alive, or another service) holds the port",
            remedy=f"find it with `ss -ltnp 'sport = :{endpoint.port}'` and stop it, or pick another port in "
            f"--rdzv-endpoint on every node",
            observed=host,
            expected={"port_free": True},
        )
    return _endpoint_result(
        Status.FAIL,
        f"{endpoint.host} ({', '.join(addrs)}) is not an address of this node, but node 0 hosts the c10d store there",
        node,
        started,
        cause=f"binding {addrs[0]}:{endpoint.port} failed: {os.strerror(code)}",
        remedy="run --node-rank 0 on the machine named in --rdzv-endpoint, or point --rdzv-endpoint at "
        "this node's address",
        observed=host,
        expected={"local_address": True},
    )


def _connect_until(
    endpoint: Endpoint,
    addrs: list[str],
    wait_s: float,
    deadline: float,
    observed: dict[str, object],
    node: str | None,
    started: float,
) -> Result:
    """A client node: connect until the store answers, the deadline passes, or the network has no route."""
    attempts = 0
    while True:
        attempts += 1
        reason = _connect_error(addrs[0], endpoint.port, min(CONNECT_ATTEMPT_S, max(deadline - time.monotonic(), 0.1)))
        if reason is None:
            return _endpoint_result(
                Status.PASS,
                f"reached the c10d store at {endpoint} ({addrs[0]})",
                node,
                None,
                observed={**observed, "role": "client", "attempts": attempts},
                metrics={"connect_s": round(wait_s - (deadline - time.monotonic()), 3)},
            )
        if reason.startswith("network unreachable") or time.monotonic() >= deadline:
            break
        time.sleep(0.25)
    source = route_source(addrs[0])
    return _endpoint_result(
        Status.FAIL,
        f"cannot reach {endpoint} from this node: {reason} after {attempts} attempts in {wait_s:.0f} s",
        node,
        started,
        cause="torchrun would wait for the rendezvous until its join timeout and then fail with a c10d timeout",
        remedy=f"start node 0 first and check that {addrs[0]}:{endpoint.port} is open between nodes "
        f"(`nc -zv {addrs[0]} {endpoint.port}` from this node; firewall / security group / NetworkPolicy "
        f"must allow TCP {endpoint.port})",
        observed={**observed, "role": "client", "error": reason, "attempts": attempts, "source_address": source},
        expected={"reachable": True},
    )


def check_endpoint(endpoint: Endpoint, node_rank: int | None, wait_s: float, node: str | None = None) -> Result:
    """Node 0 must be able to host the c10d store on the endpoint; every other node must reach it.

    A refused or timed-out connect is retried until `wait_s` (node 0 may start a little later);
    a network with no route at all fails at once.
    """
    started = time.time()
    deadline = time.monotonic() + wait_s
    addrs, error = _resolve_until(endpoint, wait_s, deadline)
    base = {"endpoint": str(endpoint), "node_rank": node_rank}
    if not addrs:
        return _endpoint_result(
            Status.FAIL,
            f"cannot resolve {endpoint.host} from this node: {error}; expected it to resolve to node 0's address",
            node,
            started,
            cause="the rendezvous host name is unknown here (DNS, /etc/hosts, or a headless Service that is not ready)",
            remedy=f"use node 0's IP address in --rdzv-endpoint, or make {endpoint.host} resolvable on every node",
            observed={**base, "resolve_error": error},
            expected={"resolves": True},
        )
    observed: dict[str, object] = {**base, "addresses": addrs}
    if node_rank == 0 or (node_rank is None and _is_local(addrs)):
        hosted = _host_store(endpoint, addrs, node_rank, observed, node, started)
        if hosted is not None:
            return hosted
    return _connect_until(endpoint, addrs, wait_s, deadline, observed, node, started)


# -- the interface gloo / NCCL would use --------------------------------------------------


def _ifname_fail(summary: str, **kw: Any) -> Result:
    # A failure carries when it was seen: the root cause is the earliest.
    return Result(IFNAME_ID, IFNAME_TITLE, Status.FAIL, summary, phase="preflight", started=time.time(), **kw)


def _ifname_pass(summary: str, **kw: Any) -> Result:
    return Result(IFNAME_ID, IFNAME_TITLE, Status.PASS, summary, phase="preflight", **kw)


def _ifname_result(
    var: str,
    spec: str,
    addresses: Mapping[str, list[str]],
    remote_master: bool,
    route: dict[str, str | None],
    node: str | None,
) -> Result:
    """What one *_SOCKET_IFNAME selects here: an interface that is up with an address (not only the
    loopback when the master is on another node), or why not and which one to name instead."""
    source, route_if = route["route_source"], route["route_interface"]
    picked = match_ifname(spec, list(addresses), var)
    usable = [n for n in picked if addresses.get(n) and is_up(n) is not False]
    observed = {
        "variable": var,
        "value": spec,
        "selected": picked,
        "usable": usable,
        "interfaces": {n: a for n, a in addresses.items() if a},
        **route,
    }
    listing = ", ".join(f"{n} ({a[0]})" for n, a in addresses.items() if a) or "none with an address"
    if not usable:
        why = "matches no interface" if not picked else f"selects {', '.join(picked)}, which has no address or is down"
        return _ifname_fail(
            f"{var}={spec} {why}; this node has {listing}",
            cause=f"{'gloo' if var.startswith('GLOO') else 'NCCL'} would fail to create its socket device "
            f"when the process group starts",
            remedy=f"set {var}={route_if or 'the interface that carries traffic between nodes'}"
            + (f" (the interface of the route to the master, {source})" if route_if else "")
            + f", or unset {var}",
            observed=observed,
            expected={"usable_interface": True},
            node=node,
        )
    loopback_only = all(all(ipaddress.ip_address(a).is_loopback for a in addresses[n]) for n in usable)
    if loopback_only and remote_master:
        return _ifname_fail(
            f"{var}={spec} selects only the loopback ({', '.join(usable)}), but the master is on another node",
            cause="other nodes cannot connect to a loopback address",
            remedy=f"set {var}={route_if or 'the interface that carries traffic between nodes'}",
            observed=observed,
            expected={"non_loopback": True},
            node=node,
        )
    return _ifname_pass(
        f"{var}={spec} selects {', '.join(f'{n} ({addresses[n][0]})' for n in usable)}",
        observed={**observed, "interface": usable[0], "address": addresses[usable[0]][0]},
        node=node,
    )


def check_interface(
    backend: str, env: Mapping[str, str], master_addresses: list[str], node: str | None = None
) -> list[Result]:
    """Every *_SOCKET_IFNAME that is set must name an interface that is up and has an address;
    without one, gloo binds whatever the hostname resolves to, which must not be the loopback."""
    addresses = interface_addresses()
    remote_master = bool(master_addresses) and not any(ipaddress.ip_address(a).is_loopback for a in master_addresses)
    source = route_source(master_addresses[0]) if master_addresses else None
    route_if = interface_of(source, addresses) if source else None
    route = {"route_source": source, "route_interface": route_if}
    results = [
        _ifname_result(var, spec, addresses, remote_master, route, node)
        for var in IFNAME_VARS.values()
        if (spec := env.get(var))
    ]
    if backend == "gloo" and not env.get("GLOO_SOCKET_IFNAME"):
        results.append(_check_gloo_hostname(addresses, remote_master, route, node))
    elif backend == "nccl" and not env.get("NCCL_SOCKET_IFNAME") and route_if:
        results.append(
            _ifname_pass(
                f"NCCL_SOCKET_IFNAME unset; the route to the master leaves through {route_if} ({source})",
                observed={**route, "interface": route_if, "address": source},
                node=node,
            )
        )
    return results


def _check_gloo_hostname(
    addresses: Mapping[str, list[str]], remote_master: bool, route: dict[str, str | None], node: str | None
) -> Result:
    # Without GLOO_SOCKET_IFNAME, gloo binds the first address the hostname resolves to
    # (ProcessGroupGloo::createDefaultDevice), and falls back to the loopback.
    hostname = socket.gethostname()
    resolved, error = _resolve(hostname, 0, RESOLVE_TIMEOUT_S)
    local = {a: n for n, addrs in addresses.items() for a in addrs}
    usable = [a for a in resolved if a in local or ipaddress.ip_address(a).is_loopback]
    first = usable[0] if usable else None
    observed = {
        "variable": "GLOO_SOCKET_IFNAME",
        "value": None,
        "hostname": hostname,
        "resolves_to": resolved,
        "interface": local.get(first or ""),
        "address": first,
        **route,
    }
    title = "socket interface for the process group"
    fix = route["route_interface"]
    remedy = f"export GLOO_SOCKET_IFNAME={fix or 'the interface that carries traffic between nodes'} on every node" + (
        f" (the interface of the route to the master, {route['route_source']})" if fix else ""
    )
    if remote_master and (first is None or ipaddress.ip_address(first).is_loopback):
        seen = (
            f"resolves to {first} (loopback)"
            if first
            else (
                f"does not resolve ({error})"
                if error
                else f"resolves to {', '.join(resolved)}, none of them on this node"
            )
        )
        return Result(
            IFNAME_ID,
            title,
            Status.FAIL,
            f"GLOO_SOCKET_IFNAME is unset and hostname {hostname} {seen}; other nodes could not connect to this one",
            cause="gloo binds the address the hostname resolves to, falling back to 127.0.0.1",
            remedy=remedy,
            observed=observed,
            expected={"non_loopback": True},
            node=node,
            phase="preflight",
            started=time.time(),
        )
    return Result(
        IFNAME_ID,
        title,
        Status.PASS,
        f"GLOO_SOCKET_IFNAME unset; gloo binds {first} (hostname {hostname})"
        + (f" on {local.get(first or '')}" if local.get(first or "") else ""),
        observed=observed,
        node=node,
        phase="preflight",
    )


def preflight(
    endpoint_text: str,
    node_rank: int | None,
    backend: str,
    env: Mapping[str, str],
    wait_s: float,
    node: str | None = None,
) -> list[Result]:
    """[endpoint result, interface results...]. The interface is checked first: when it is wrong the
    node will not launch anyway, so the endpoint gets only a short wait instead of the join timeout."""
    endpoint = parse_endpoint(endpoint_text)
    masters, _ = _resolve(endpoint.host, endpoint.port, RESOLVE_TIMEOUT_S)
    interfaces = check_interface(backend, env, masters, node)
    if any(r.status is Status.FAIL for r in interfaces):
        wait_s = min(wait_s, 2.0)
    return [check_endpoint(endpoint, node_rank, wait_s, node), *interfaces]
