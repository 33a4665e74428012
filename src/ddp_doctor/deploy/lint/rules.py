"""The checks: Unit -> hits (rule name, line, context). Wording and severity live in rules.yaml."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from ddp_doctor.deploy.lint.commandline import nnodes_max
from ddp_doctor.deploy.lint.model import Unit
from ddp_doctor.deploy.lint.quantity import human

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Hit:
    name: str
    line: int
    context: dict[str, Any] = field(default_factory=dict)


@functools.cache
def catalogue() -> dict[str, dict[str, Any]]:
    text = resources.files("ddp_doctor.deploy.lint").joinpath("rules.yaml").read_text(encoding="utf-8")
    rules: dict[str, dict[str, Any]] = yaml.safe_load(text)
    for name, rule in rules.items():
        assert rule["severity"] in SEVERITIES, name
    return rules


def rule_ids() -> list[str]:
    return [f"lint.{area}.{name}" for name, rule in catalogue().items() for area in rule["areas"]]


Check = Callable[[Unit], Iterator[Hit]]
CHECKS: list[Check] = []


def check(fn: Check) -> Check:
    CHECKS.append(fn)
    return fn


def launcher(u: Unit) -> str:
    return u.launches[0].tool if u.launches else "a PyTorchJob"


def _cpu_only(u: Unit) -> bool:
    """The workload says it means CPU ranks (gloo backend), so no GPU is expected."""
    if any(l.backend is not None and l.backend.value == "gloo" for l in u.launches):
        return True
    return any(v.value.lower() == "gloo" for k, v in u.env.items() if "BACKEND" in k.upper())


@check
def gpus_granted(u: Unit) -> Iterator[Hit]:
    if not u.trains or u.gpus is not None or u.area not in ("k8s", "docker", "compose") or _cpu_only(u):
        return
    expected = {"docker": "no --gpus", "compose": "no GPU device reservation"}.get(u.area, "")
    name = "gpu_limit_missing" if u.area == "k8s" else "gpus_missing"
    yield Hit(name, u.line, {"launcher": launcher(u), "expected_flag": expected})


@check
def gpu_requests(u: Unit) -> Iterator[Hit]:
    if u.gpu_request is None:
        return
    limit = u.gpus.value if u.gpus is not None else None
    if limit != u.gpu_request.value:
        yield Hit(
            "gpu_request_mismatch",
            u.gpu_request.line,
            {"request": u.gpu_request.value, "limit": "none" if limit is None else limit},
        )


def _nproc(u: Unit) -> tuple[int, int] | None:
    """(ranks per node, line) from the command, else from nprocPerNode / PET_NPROC_PER_NODE."""
    for launch in u.launches:
        if launch.nproc is not None:
            return (int(launch.nproc.value), launch.nproc.line) if launch.nproc.value.isdigit() else None
    if u.nproc_declared is not None and u.nproc_declared.value.isdigit():
        return int(u.nproc_declared.value), u.nproc_declared.line
    return None


@check
def nproc_matches_gpus(u: Unit) -> Iterator[Hit]:
    if u.gpus is None or u.gpus.value is None:
        return
    found = _nproc(u)
    if found is None:
        return
    nproc, line = found
    gpus = u.gpus.value
    ctx = {"nproc": nproc, "gpus": gpus, "idle": gpus - nproc}
    if nproc > gpus:
        yield Hit("nproc_exceeds_gpus", line, ctx)
    elif nproc < gpus:
        yield Hit("nproc_below_gpus", line, ctx)


@check
def slurm_tasks(u: Unit) -> Iterator[Hit]:
    if (
        u.area == "slurm"
        and u.tasks_per_node is not None
        and u.tasks_per_node.value > 1
        and any(l.under_srun and l.tool == "torchrun" for l in u.launches)
    ):
        yield Hit("tasks_per_node", u.tasks_per_node.line, {"tasks": u.tasks_per_node.value})


@check
def shm(u: Unit) -> Iterator[Hit]:
    if u.shm is None or not u.trains:
        return
    if u.shm.value == "default":
        yield Hit("shm_default", u.shm.line, {"launcher": launcher(u)})
    elif u.shm.value == "disk" and u.area == "k8s":
        yield Hit("shm_not_memory", u.shm.line)
    elif u.shm.value == "tiny":
        yield Hit("shm_small", u.shm.line, {"shm": human(u.shm_bytes or 0)})


@check
def shm_within_memory(u: Unit) -> Iterator[Hit]:
    if u.shm is None or u.shm_bytes is None or u.memory_limit is None:
        return
    if u.shm_bytes > u.memory_limit.value:
        yield Hit(
            "shm_exceeds_memory_limit", u.shm.line, {"shm": human(u.shm_bytes), "limit": human(u.memory_limit.value)}
        )


@check
def runtime_class(u: Unit) -> Iterator[Hit]:
    if u.runtime_class_applies and u.runtime_class is None:
        yield Hit("runtime_class_missing", u.line)


@check
def root(u: Unit) -> Iterator[Hit]:
    if u.root is None:
        return
    if u.area == "dockerfile":
        yield Hit("no_user" if u.root.value == "no USER" else "root_user", u.root.line, {"reason": u.root.value})
    elif u.trains or u.area != "k8s":
        yield Hit("run_as_root", u.root.line, {"reason": u.root.value})


@check
def trade_offs(u: Unit) -> Iterator[Hit]:
    if u.privileged is not None:
        yield Hit("privileged", u.privileged.line)
    if u.host_network is not None:
        yield Hit("host_network", u.host_network.line)
    if u.host_ipc is not None:
        yield Hit("host_ipc", u.host_ipc.line)
    if u.ipc_lock is not None:
        yield Hit("ipc_lock", u.ipc_lock.line)


def unpinned(image: str) -> str | None:
    """' (":latest")' / ' (no tag: latest)' for an unpinned image; None when pinned."""
    if "@sha256:" in image or "$" in image:
        return None
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return " (no tag, so :latest)"
    return " (:latest)" if last.endswith(":latest") else None


@check
def pinned(u: Unit) -> Iterator[Hit]:
    if u.image is None:
        return
    note = unpinned(u.image.value)
    if note is not None:
        yield Hit("latest_tag", u.image.line, {"image": u.image.value, "tag_note": note})


@check
def log_volume(u: Unit) -> Iterator[Hit]:
    if u.trains and u.persistent_volume is False:
        yield Hit("no_log_volume", u.line, {"launcher": launcher(u)})


def is_local(host: str) -> bool:
    host = host.strip().strip("[]\"'")
    if host.lower() in ("localhost", "localhost.localdomain", "0.0.0.0", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def node_count(u: Unit) -> int:
    counts = [u.nodes.value if u.nodes is not None else 1]
    counts += [n for n in (nnodes_max(l) for l in u.launches) if n is not None]
    return max(counts)


@check
def multi_node_rendezvous(u: Unit) -> Iterator[Hit]:
    nodes = node_count(u)
    if nodes <= 1:
        return
    if any(launch.standalone for launch in u.launches):
        # The rendezvous address is ignored under --standalone; that flag is the mistake.
        for launch in u.launches:
            if launch.standalone:
                yield Hit("standalone_multinode", launch.line, {"nodes": nodes})
        return
    candidates = []
    for launch in u.launches:
        if launch.rdzv_endpoint is not None:
            candidates.append(
                ("--rdzv-endpoint", launch.rdzv_endpoint.value.rsplit(":", 1)[0], launch.rdzv_endpoint.line)
            )
        if launch.master_addr is not None:
            candidates.append(("--master-addr", launch.master_addr.value, launch.master_addr.line))
    if "MASTER_ADDR" in u.env:
        candidates.append(("MASTER_ADDR", u.env["MASTER_ADDR"].value, u.env["MASTER_ADDR"].line))
    for fld, value, line in candidates:
        if is_local(value):
            yield Hit("master_addr_localhost", line, {"nodes": nodes, "value": value, "field": fld})
            return


@check
def slurm_srun(u: Unit) -> Iterator[Hit]:
    if u.area != "slurm" or u.nodes is None or u.nodes.value <= 1:
        return
    for launch in u.launches:
        if not launch.under_srun:
            yield Hit("torchrun_without_srun", launch.line, {"nodes": u.nodes.value})


@check
def structure(u: Unit) -> Iterator[Hit]:
    for found in u.structural:
        yield Hit(found.value, found.line, {"names": "?"})


def evaluate(u: Unit) -> list[Hit]:
    rules = catalogue()
    hits = []
    for fn in CHECKS:
        for hit in fn(u):
            if u.area in rules[hit.name]["areas"]:
                hits.append(hit)
    return hits
