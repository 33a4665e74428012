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
from ddp_doctor.checks.model import Check
from ddp_doctor.env import trust_checks
from ddp_doctor.knowledge import arch
from ddp_doctor.report import Result, Status

F = TypeVar("F")

NOFILE_WARN = 4096

GPU_RUNTIME_REMEDY = """start the container with the NVIDIA runtime so the driver libraries are mounted in:
docker run --gpus all ...   (needs nvidia-container-toolkit on the host)
podman run --device nvidia.com/gpu=all ...   (CDI, after `nvidia-ctk cdi generate`)
Kubernetes: request the GPUs (resources.limits: {nvidia.com/gpu: 8}) on a node with the NVIDIA device plugin"""


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


def check_gpus(facts: dict[str, Any]) -> Result:
    g = _section(facts, "gpus")
    title = "GPUs (NVML)"
    nodes = g.get("device_nodes") or []
    if g.get("nvml_missing"):
        return Result(
            "env.gpus",
            title,
            Status.ERROR,
            f"cannot look for GPUs: {g.get('error')}",
            cause="ddp-doctor's own dependency nvidia-ml-py (pynvml) is missing, so NVML was never asked",
            remedy=f"{_python(facts)} -m pip install nvidia-ml-py",
        )
    if not g.get("driver_loaded"):
        if nodes:
            return Result(
                "env.gpus",
                title,
                Status.FAIL,
                f"GPU device nodes exist ({', '.join(nodes[:3])}) but NVML does not work: {g.get('error')}",
                cause="the NVIDIA user-space driver (libnvidia-ml.so, libcuda.so) is missing or does not match the kernel module",
                remedy=GPU_RUNTIME_REMEDY
                + "\non a host: reinstall the driver so user-space and kernel module versions match, then reboot",
                observed={"device_nodes": nodes, "error": g.get("error")},
            )
        return _skip(
            "env.gpus",
            title,
            f"no NVIDIA driver or GPU here ({g.get('error') or 'NVML unavailable'}): "
            "GPU checks skipped; DDP can still run on CPU with gloo",
        )
    if g.get("error"):
        return Result(
            "env.gpus",
            title,
            Status.ERROR,
            f"NVML started but a query failed: {g['error']}",
            cause="the doctor could not read the GPUs; this is not a verdict on them",
        )
    physical, visible = int(g.get("physical_count") or 0), list(g.get("visible") or [])
    cvd = g.get("cuda_visible_devices")
    observed = {
        "driver": g.get("driver_version"),
        "physical": physical,
        "visible": len(visible),
        "CUDA_VISIBLE_DEVICES": cvd,
    }
    if physical == 0:
        return _skip(
            "env.gpus", title, f"driver {g.get('driver_version')} is loaded but reports no GPU: GPU checks skipped"
        )
    if not visible:
        return Result(
            "env.gpus",
            title,
            Status.WARN,
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides all {physical} GPU(s); expected at least one visible",
            cause="CUDA sees no device, so NCCL cannot run; training would fall back to CPU",
            remedy="unset CUDA_VISIBLE_DEVICES, or list valid indices/UUIDs (see `nvidia-smi -L`)",
            observed=observed,
        )
    names = ", ".join(
        f"{d.get('index')}: {d.get('name')} ({_size(d.get('memory_bytes'))}, "
        f"{arch.sm_name(d['compute_capability']) if d.get('compute_capability') else 'sm_?'})"
        for d in visible
    )
    migs = [d for d in visible if d.get("mig_mode") == "enabled"]
    entries = [e for e in (cvd or "").split(",") if e.strip()]
    if cvd is not None and len(entries) > len(visible):
        return Result(
            "env.gpus",
            title,
            Status.WARN,
            f"CUDA_VISIBLE_DEVICES={cvd!r} names {len(entries)} devices but only {len(visible)} resolve: {names}",
            cause="CUDA stops at the first entry that matches no GPU and ignores the rest",
            remedy="fix CUDA_VISIBLE_DEVICES to existing indices or UUIDs (`nvidia-smi -L`)",
            observed=observed,
        )
    if migs:
        return Result(
            "env.gpus",
            title,
            Status.WARN,
            f"MIG mode is on for GPU(s) {', '.join(str(d['index']) for d in migs)}: {names}",
            cause="NCCL cannot connect several MIG instances (no P2P or CUDA IPC between them); DDP across MIG slices fails",
            remedy="use whole GPUs for DDP (`nvidia-smi -i N -mig 0`), or one MIG slice per job",
            observed=observed,
        )
    selected = f" (CUDA_VISIBLE_DEVICES={cvd} selects {len(visible)} of {physical})" if cvd is not None else ""
    return Result(
        "env.gpus",
        title,
        Status.PASS,
        f"{len(visible)} GPU(s) visible{selected}: {names}",
        observed=observed,
        metrics={"gpus_visible": float(len(visible))},
    )


def check_driver_cuda(facts: dict[str, Any]) -> Result:
    t, g = _section(facts, "torch"), _section(facts, "gpus")
    title = "driver vs CUDA runtime"
    if not g.get("driver_loaded"):
        return _skip("env.driver_cuda", title, "no NVIDIA driver here")
    if t.get("flavour") != "cuda" or not t.get("cuda"):
        return _skip("env.driver_cuda", title, f"torch is not a CUDA build ({t.get('flavour') or 'not installed'})")
    torch_cuda, driver, driver_cuda = str(t["cuda"]), str(g.get("driver_version") or ""), g.get("cuda_driver_version")
    floor = knowledge.driver_floor(torch_cuda) or {}
    observed = {"driver": driver, "driver_max_cuda": driver_cuda, "torch_cuda": torch_cuda}
    expected = {"minor_compat_driver": floor.get("minor_compat"), "ga_driver": floor.get("ga_driver")}
    tv, dv = knowledge.version_tuple(torch_cuda)[:2], knowledge.version_tuple(driver)
    if driver_cuda and knowledge.version_tuple(driver_cuda)[:2] >= tv:
        return Result(
            "env.driver_cuda",
            title,
            Status.PASS,
            f"driver {driver} supports CUDA {driver_cuda} >= torch's CUDA {torch_cuda}",
            observed=observed,
            expected=expected,
        )
    ga, compat = floor.get("ga_driver"), floor.get("minor_compat")
    if driver_cuda is None and ga and dv >= knowledge.version_tuple(ga):
        return Result(
            "env.driver_cuda",
            title,
            Status.PASS,
            f"driver {driver} >= {ga}, the CUDA {torch_cuda} GA driver",
            observed=observed,
            expected=expected,
        )
    same_major = driver_cuda is None or knowledge.version_tuple(driver_cuda)[:1] == tv[:1]
    rel = knowledge.release(str(t.get("version") or "")) or {}
    fitting = [
        v
        for v in rel.get("cuda_variants", [])
        if driver_cuda
        and knowledge.version_tuple(knowledge.cuda_of(v) or "99")[:2] <= knowledge.version_tuple(driver_cuda)[:2]
    ]
    alt = (
        (
            f"\nor install the torch wheel built for CUDA <= {driver_cuda}:\n"
            f"{knowledge.install_command(str(t.get('version')).split('+')[0], fitting[-1], _python(facts))}"
        )
        if fitting
        else ""
    )
    upgrade = f"upgrade the NVIDIA driver to >= {ga or compat} (the CUDA {torch_cuda} GA driver){alt}"
    if compat and same_major and dv >= knowledge.version_tuple(compat):
        return Result(
            "env.driver_cuda",
            title,
            Status.WARN,
            f"driver {driver} (CUDA {driver_cuda or '?'}) is older than torch's CUDA {torch_cuda}; it runs only through minor version compatibility (>= {compat})",
            cause="with minor version compatibility, PTX JIT of newer PTX and some new CUDA APIs fail (cudaErrorCallRequiresNewerDriver)",
            remedy=upgrade,
            observed=observed,
            expected=expected,
        )
    return Result(
        "env.driver_cuda",
        title,
        Status.FAIL,
        f"driver {driver} supports CUDA {driver_cuda or '?'}, but torch is built with CUDA {torch_cuda}, which needs driver >= {compat or ga}",
        cause=f"CUDA {torch_cuda} applications need a driver of the CUDA {tv[0]}.x family (>= {compat}); CUDA initialisation fails with 'driver too old'",
        remedy=upgrade,
        observed=observed,
        expected=expected,
    )


def check_gpu_arch(facts: dict[str, Any]) -> Result:
    t, g = _section(facts, "torch"), _section(facts, "gpus")
    title = "GPU architecture in torch's kernels"
    visible = list(g.get("visible") or [])
    if not visible:
        return _skip("env.gpu_arch", title, "no visible GPU")
    if t.get("flavour") != "cuda":
        return _skip("env.gpu_arch", title, f"torch is not a CUDA build ({t.get('flavour') or 'not installed'})")
    archs = list(t.get("arch_list") or [])
    if not archs:
        return _skip("env.gpu_arch", title, "torch's compiled arch list is unknown (torch was not imported here)")
    missing: list[tuple[dict[str, Any], str, str | None]] = []
    fine: list[tuple[dict[str, Any], str, str | None]] = []
    for d in visible:
        cc = d.get("compute_capability")
        if not cc:
            continue
        sm = arch.sm_name(cc)
        how = arch.how_it_runs(sm, archs)
        (fine if how else missing).append((d, sm, how))
    observed = {"arch_list": archs, "gpus": [sm for _, sm, _ in fine + missing]}
    if missing:
        d, sm, _ = missing[0]
        version = str(t.get("version") or "")
        builds = knowledge.variants_supporting(version, sm)
        builds = [b for b in builds if _fits_driver(b, _driver_cuda(facts))] or builds
        base = version.split("+")[0]
        remedy = (
            f"install a build with {sm} kernels:\n" + knowledge.install_command(base, builds[-1], _python(facts))
            if builds
            else f"install a torch release whose wheels include {sm} (see the release's CUDA support matrix)"
        )
        return Result(
            "env.gpu_arch",
            title,
            Status.FAIL,
            f"no kernel image for {sm} ({d.get('name')}): this torch has {' '.join(archs)}",
            cause=f"neither {sm} SASS, an older {sm[:4]}x SASS of the same major, nor PTX <= {sm[3:]} is compiled into this build; "
            "every CUDA kernel fails with 'no kernel image is available for execution on the device'",
            remedy=remedy,
            observed=observed,
            expected={"arch": sm},
        )
    runs = "; ".join(f"{sm} ({d.get('name')}) via {how}" for d, sm, how in fine)
    return Result("env.gpu_arch", title, Status.PASS, f"{runs}", observed=observed)


def check_gpu_topology(facts: dict[str, Any]) -> Result:
    g = _section(facts, "gpus")
    title = "GPU peer-to-peer topology"
    if len(g.get("visible") or []) < 2:
        return _skip(
            "env.gpu_topology", title, f"{len(g.get('visible') or [])} visible GPU(s); topology matters from 2"
        )
    pairs = list(_section(facts, "topology").get("pairs") or g.get("topology") or [])
    if not pairs:
        return _skip("env.gpu_topology", title, "NVML reported no pair topology")
    bad = [p for p in pairs if p.get("p2p_read") not in ("ok", None)]
    nvlink = [p for p in pairs if p.get("p2p_nvlink") == "ok"]
    observed = {"pairs": pairs}
    if bad:
        shown = ", ".join(f"{p['a']}<->{p['b']}: {p['p2p_read']} ({p.get('path')})" for p in bad[:4])
        return Result(
            "env.gpu_topology",
            title,
            Status.WARN,
            f"no P2P between {len(bad)} of {len(pairs)} GPU pairs: {shown}",
            cause="without peer-to-peer, NCCL stages intra-node traffic through host memory: lower bus bandwidth",
            remedy="check IOMMU/ACS settings in the BIOS and kernel (`iommu=pt`), and that the VM passes GPUs with P2P enabled",
            observed=observed,
        )
    return Result(
        "env.gpu_topology",
        title,
        Status.PASS,
        f"P2P between all {len(pairs)} GPU pairs; NVLink on {len(nvlink)} of them",
        observed=observed,
        metrics={"gpu_pairs_nvlink": float(len(nvlink))},
    )


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
    ("env.gpus", check_gpus),
    ("env.driver_cuda", check_driver_cuda),
    ("env.gpu_arch", check_gpu_arch),
    ("env.gpu_topology", check_gpu_topology),
    ("env.shm", check_shm),
    ("env.ulimits", check_ulimits),
    ("env.container", check_container),
    ("env.user", check_user),
    ("env.env_vars", check_env_vars),
    ("env.network", check_network),
    ("env.gpus.expected", trust_checks.check_gpus_expected),
    ("env.gpus.busy", trust_checks.check_gpus_busy),
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
