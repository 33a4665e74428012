"""Static checks: small functions from facts (the dict of env.facts.gather) to Results.

Everything here works from the facts dict alone, so a facts file recorded on another machine
(a GPU node, an image) can be judged again: `evaluate(json.load(f)["facts"])`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ddp_doctor import knowledge
from ddp_doctor.checks import (
    distributed,
    driver_cuda,
    gpu_arch,
    gpu_topology,
    gpus,
    gpus_busy,
    gpus_expected,
    install,
    nccl,
    numpy_import,
    official_build,
    python,
    shm,
    table,
    torch_build,
    torch_import,
    torchrun,
    user,
)
from ddp_doctor.checks.facts import (
    InstallTarget,
    NcclFacts,
    PythonFacts,
    ShmFacts,
    TorchFacts,
    TorchrunFacts,
    UserFacts,
)
from ddp_doctor.checks.gpufacts import BusyFacts, ExpectedGpusFacts, GpuFacts, GpusFacts, TorchOnGpuFacts
from ddp_doctor.checks.model import Check
from ddp_doctor.env import trust_checks
from ddp_doctor.report import Result, Status

F = TypeVar("F")

NOFILE_WARN = 4096

GPU_RUNTIME_REMEDY = table.gpu_runtime().remedy


def _section(facts: dict[str, Any], key: str) -> dict[str, Any]:
    value = facts.get(key)
    return value if isinstance(value, dict) else {}


_size = table.size_text


def _python(facts: dict[str, Any]) -> str:
    return str(_section(facts, "python").get("executable") or sys.executable)


def _torch_ok(facts: dict[str, Any]) -> bool:
    t = _section(facts, "torch")
    return bool(t.get("installed")) and t.get("importable") is not False


def _skip(id_: str, title: str, why: str) -> Result:
    return Result(id_, title, Status.SKIP, why)


def _driver_cuda(facts: dict[str, Any]) -> str | None:
    return _section(facts, "gpus").get("cuda_driver_version")


def _target(facts: dict[str, Any]) -> InstallTarget:
    return InstallTarget.from_env(facts)


def _py_fits(rel: dict[str, Any], py: str) -> bool:
    return install.py_fits(rel, py)


def _fits_driver(variant: str, driver_cuda: str | None) -> bool:
    return install.fits_driver(variant, driver_cuda)


def suggest_variant(rel: dict[str, Any], facts: dict[str, Any]) -> str:
    return install.suggest_variant(rel, _target(facts))


def _install_for(facts: dict[str, Any], torch_version: str | None = None) -> str:
    return install.install_for(_target(facts), torch_version)


# --- the checks -------------------------------------------------------------------------


def check_torch_installed(facts: dict[str, Any]) -> Result:
    return torch_build.INSTALLED.run(TorchFacts.from_env(facts), "env")


def check_torch_build(facts: dict[str, Any]) -> Result:
    return torch_build.BUILD.run(TorchFacts.from_env(facts), "env")


def check_official_build(facts: dict[str, Any]) -> Result:
    return official_build.CHECK.run(TorchFacts.from_env(facts), "env")


def check_nccl(facts: dict[str, Any]) -> Result:
    return nccl.CHECK.run(NcclFacts.from_env(facts), "env")


def check_torchrun(facts: dict[str, Any]) -> Result:
    return torchrun.CHECK.run(TorchrunFacts.from_env(facts), "env")


def check_shm(facts: dict[str, Any]) -> Result:
    return shm.CHECK.run(ShmFacts.from_env(facts), "env")


def check_ulimits(facts: dict[str, Any]) -> Result:
    u = _section(facts, "ulimits")
    ib = _section(_section(facts, "network"), "infiniband").get("devices") or []
    title = "ulimits (memlock, nofile)"
    memlock, nofile = u.get("memlock_soft_bytes"), u.get("nofile_soft")
    shown = f"memlock {'unlimited' if memlock is None else _size(memlock)}, nofile {'unlimited' if nofile is None else nofile}"
    observed = {"memlock_soft_bytes": memlock, "nofile_soft": nofile, "infiniband": ib}
    if ib and memlock is not None:
        return Result(
            "env.ulimits",
            title,
            Status.WARN,
            f"{shown} with InfiniBand devices {', '.join(ib)}; expected memlock unlimited",
            cause="NCCL registers (pins) buffers for RDMA; a memlock limit makes it fail or fall back to sockets",
            remedy="docker run --ulimit memlock=-1:-1 ...; on a host: `* - memlock unlimited` in /etc/security/limits.conf; "
            "Slurm: PropagateResourceLimits / --propagate=MEMLOCK",
            observed=observed,
            expected={"memlock": "unlimited"},
        )
    if nofile is not None and nofile < NOFILE_WARN:
        return Result(
            "env.ulimits",
            title,
            Status.WARN,
            f"{shown}; expected nofile >= {NOFILE_WARN}",
            cause="each DataLoader worker, rank and NCCL connection holds file descriptors; 'Too many open files' follows",
            remedy="ulimit -n 65536 (docker run --ulimit nofile=65536:65536 ...)",
            observed=observed,
            expected={"nofile": f">= {NOFILE_WARN}"},
        )
    note = "" if ib else " (memlock matters only with InfiniBand/RDMA, none here)"
    return Result("env.ulimits", title, Status.PASS, shown + note, observed=observed)


def check_container(facts: dict[str, Any]) -> Result:
    c, g = _section(facts, "container"), _section(facts, "gpus")
    title = "container and GPU runtime"
    kind = c.get("kind") or ("kubernetes" if c.get("kubernetes") else None)
    evidence = ", ".join(c.get("evidence") or [])
    where = (
        f"{kind} container" + (" in Kubernetes" if c.get("kubernetes") and kind != "kubernetes" else "")
        if c.get("in_container")
        else "not in a container"
    )
    nodes = g.get("device_nodes") or []
    observed = {"kind": kind, "kubernetes": c.get("kubernetes"), "device_nodes": nodes}
    if c.get("in_container") and nodes and not g.get("driver_loaded"):
        return Result(
            "env.container",
            title,
            Status.FAIL,
            f"{where}: GPU device nodes are present but the NVIDIA driver libraries are not ({g.get('error')})",
            cause="the container was started without --gpus / the NVIDIA container runtime, so libnvidia-ml and libcuda were not mounted",
            remedy=GPU_RUNTIME_REMEDY,
            observed=observed,
        )
    if c.get("in_container") and not nodes and not g.get("driver_loaded"):
        return Result(
            "env.container",
            title,
            Status.PASS,
            f"{where} ({evidence}); no GPU was passed in (if the host has GPUs: start it with --gpus all)",
            observed=observed,
        )
    return Result(
        "env.container", title, Status.PASS, f"{where}" + (f" ({evidence})" if evidence else ""), observed=observed
    )


def check_user(facts: dict[str, Any]) -> Result:
    return user.CHECK.run(UserFacts.from_env(facts), "env")


def _ifname_matches(value: str, names: list[str]) -> tuple[bool, str]:
    """NCCL's rules: comma-separated prefixes; '=' makes them exact; '^' excludes (nothing to check)."""
    value = value.strip()
    if value.startswith("^"):
        return True, "exclusion list"
    exact = value.startswith("=")
    entries = [e.strip() for e in value.lstrip("=").split(",") if e.strip()]
    for e in entries:
        if any((n == e) if exact else n.startswith(e) for n in names):
            return True, e
    return False, ",".join(entries)


def check_env_vars(facts: dict[str, Any]) -> Result:
    env = {str(k): str(v) for k, v in (facts.get("env") or {}).items()}
    rules = knowledge.env_rules()
    names = [i.get("name") for i in _section(facts, "network").get("interfaces") or [] if i.get("name")]
    findings: list[tuple[Status, str, str | None]] = []
    for var in rules.get("ifname_vars", []):
        if var in env:
            ok, _ = _ifname_matches(env[var], names)
            if not ok:
                findings.append(
                    (
                        Status.FAIL,
                        f"{var}={env[var]} matches no interface (have: {', '.join(names)})",
                        trust_checks.ifname_remedy(var, facts),
                    )
                )
    for rule in rules.get("rules", []):
        value = env.get(rule["name"])
        if value is None or (rule["when"] != "set" and value != rule["when"]):
            continue
        findings.append((Status(rule["status"]), f"{rule['name']}={value}: {rule['says']}", rule.get("remedy")))
    rank_set = {k: env[k] for k in rules.get("rank_vars", []) if k in env}
    if rank_set:
        ints = {}
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
            if k in rank_set:
                try:
                    ints[k] = int(rank_set[k])
                except ValueError:
                    findings.append(
                        (Status.FAIL, f"{k}={rank_set[k]!r} is not an integer", f"set {k} to an integer or unset it")
                    )
        if "RANK" in ints and "WORLD_SIZE" in ints and not 0 <= ints["RANK"] < ints["WORLD_SIZE"]:
            findings.append(
                (
                    Status.FAIL,
                    f"RANK={ints['RANK']} is outside 0..WORLD_SIZE-1 (WORLD_SIZE={ints['WORLD_SIZE']})",
                    "fix RANK/WORLD_SIZE, or unset both and let torchrun set them",
                )
            )
        if "MASTER_PORT" in ints and not 1 <= ints["MASTER_PORT"] <= 65535:
            findings.append(
                (Status.FAIL, f"MASTER_PORT={ints['MASTER_PORT']} is not a TCP port", "use a port in 1..65535")
            )
        if ("RANK" in ints) != ("WORLD_SIZE" in ints) or ("MASTER_ADDR" in rank_set) != ("MASTER_PORT" in rank_set):
            findings.append(
                (
                    Status.WARN,
                    "only part of RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT is set: "
                    + ", ".join(f"{k}={v}" for k, v in rank_set.items()),
                    "set all four for a manual env:// launch, or none and use torchrun",
                )
            )
        if "TORCHELASTIC_RUN_ID" not in env and not any(s is Status.FAIL for s, _, _ in findings):
            findings.append(
                (
                    Status.WARN,
                    "set outside torchrun: " + ", ".join(f"{k}={v}" for k, v in rank_set.items()),
                    "torchrun overrides them, but a plain `python train.py` would use them; unset them in the shell/image",
                )
            )
    title = "distributed environment variables"
    observed = {"env": env}
    if not findings:
        shown = ", ".join(f"{k}={v}" for k, v in env.items() if k.startswith(("NCCL_", "TORCH_NCCL_")))
        return Result(
            "env.env_vars",
            title,
            Status.PASS,
            "no problematic settings" + (f" ({shown})" if shown else " (no RANK/WORLD_SIZE/MASTER_*/NCCL_* set)"),
            observed=observed,
        )
    order = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2}
    findings.sort(key=lambda f: order.get(f[0], 3))
    worst = findings[0][0]
    remedies = [r for s, _, r in findings if r and s is not Status.PASS]
    return Result(
        "env.env_vars",
        title,
        worst,
        "; ".join(text for _, text, _ in findings),
        cause="these variables change how torchrun, torch.distributed or NCCL behave"
        if worst is not Status.PASS
        else None,
        remedy="\n".join(remedies) or None,
        observed=observed,
    )


def check_network(facts: dict[str, Any]) -> Result:
    net = _section(facts, "network")
    title = "network interfaces and InfiniBand"
    ifaces = list(net.get("interfaces") or [])
    ib = _section(net, "infiniband")
    usable = [i for i in ifaces if not i.get("loopback") and i.get("addresses") and i.get("state") != "down"]
    shown = ", ".join(f"{i['name']} {i['addresses'][0]}" for i in usable[:4])
    observed = {
        "interfaces": [i.get("name") for i in ifaces],
        "usable": [i.get("name") for i in usable],
        "infiniband": ib.get("devices"),
        "libibverbs": ib.get("libibverbs"),
    }
    if ib.get("devices") and not ib.get("libibverbs"):
        return Result(
            "env.network",
            title,
            Status.WARN,
            f"InfiniBand devices {', '.join(ib['devices'])} but no libibverbs; interfaces: {shown or 'loopback only'}",
            cause="NCCL needs libibverbs (rdma-core) to use InfiniBand/RoCE; without it multi-node traffic uses TCP",
            remedy="install rdma-core / libibverbs1 in the image (apt-get install -y libibverbs1 ibverbs-providers)",
            observed=observed,
        )
    if not usable:
        return Result(
            "env.network",
            title,
            Status.WARN,
            "only loopback has an address; multi-node training cannot reach other nodes",
            cause="no non-loopback interface is up with an address",
            remedy="for multi-node runs attach a network (docker --network host, a pod network); single-node runs are fine",
            observed=observed,
        )
    ib_note = f"; InfiniBand: {', '.join(ib['devices'])}" if ib.get("devices") else "; no InfiniBand"
    return Result("env.network", title, Status.PASS, f"{shown}{ib_note}", observed=observed)


def _unit(check: Check[F], adapter: Callable[[Mapping[str, Any]], F]) -> tuple[str, Callable[[dict[str, Any]], Result]]:
    """A declared unit of checks/ run on this host: its facts built from the facts dict, its env id."""

    def run(facts: dict[str, Any]) -> Result:
        return check.run(adapter(facts), "env")

    return check.id_for("env"), run


CHECKS: list[tuple[str, Callable[[dict[str, Any]], Result]]] = [
    _unit(python.CHECK, PythonFacts.from_env),
    ("env.torch.installed", check_torch_installed),
    _unit(torch_import.CHECK, TorchFacts.from_env),
    ("env.torch.build", check_torch_build),
    _unit(numpy_import.CHECK, TorchFacts.from_env),
    ("env.official_build", check_official_build),
    _unit(distributed.CHECK, TorchFacts.from_env),
    ("env.nccl", check_nccl),
    ("env.torchrun", check_torchrun),
    _unit(gpus.CHECK, GpusFacts.from_env),
    _unit(driver_cuda.CHECK, TorchOnGpuFacts.from_env),
    _unit(gpu_arch.CHECK, TorchOnGpuFacts.from_env),
    _unit(gpu_topology.CHECK, GpuFacts.from_env),
    ("env.shm", check_shm),
    ("env.ulimits", check_ulimits),
    ("env.container", check_container),
    ("env.user", check_user),
    ("env.env_vars", check_env_vars),
    ("env.network", check_network),
    _unit(gpus_expected.CHECK, ExpectedGpusFacts.from_env),
    _unit(gpus_busy.CHECK, BusyFacts.from_env),
    ("env.dist_vars", trust_checks.check_dist_vars),
]


TORCH_BUILD_CHECKS = frozenset({"env.torch.build", "env.official_build", "env.distributed", "env.nccl"})
"""The checks about the torch build alone; the image audit runs these over facts read from an image."""


def evaluate(facts: dict[str, Any], only: set[str] | frozenset[str] | None = None) -> list[Result]:
    """Run every static check over `facts`; a check that breaks becomes an `error` Result, never a pass."""
    results = []
    for id_, check in CHECKS:
        if only is not None and id_ not in only:
            continue
        try:
            results.append(check(facts))
        except Exception as exc:  # noqa: BLE001 - the doctor's own bug or a malformed facts file: an unknown, not a pass
            results.append(
                Result(
                    id_,
                    id_,
                    Status.ERROR,
                    f"the check could not run: {type(exc).__name__}: {exc}",
                    cause="the facts were incomplete or malformed, or the check has a bug",
                )
            )
    return results
