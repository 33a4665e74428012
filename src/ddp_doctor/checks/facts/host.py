"""Typed facts about the machine and the process that runs the job: /dev/shm, the user, limits,
container, network and environment variables, read from the report's `shm`, `user`, `ulimits`,
`container`, `network` and `env` sections. Only /dev/shm's size is unknown to an image, and only the
user is known to one (its config's User).

As in facts.software, the `from_env` / `from_image` adapters are the only code that knows the JSON
shape, and a field of the wrong type raises (`typed`), so the checks reading it end as `error` Results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddp_doctor import knowledge
from ddp_doctor.checks.facts.fields import bool_at, int_at, section, str_at, typed, version_tuple
from ddp_doctor.checks.facts.gpu_devices import GpuFacts


def _strings(value: Any, what: str) -> tuple[str, ...] | None:
    items = typed(value, list, what)
    return None if items is None else tuple(typed(i, str, f"{what}[]") for i in items)


@dataclass(frozen=True)
class Interface:
    name: str
    state: str | None
    """'up' | 'down' | 'unknown' (virtual interfaces the kernel does not report)."""
    loopback: bool
    addresses: tuple[str, ...]

    @classmethod
    def from_dict(cls, i: Mapping[str, Any]) -> Interface:
        name = typed(i.get("name"), str, "network.interfaces[].name")
        if not name:
            raise TypeError("facts field network.interfaces[].name is missing: an interface without a name")
        return cls(
            name=name,
            state=typed(i.get("state"), str, "network.interfaces[].state"),
            loopback=bool(i.get("loopback")),
            addresses=_strings(i.get("addresses"), "network.interfaces[].addresses") or (),
        )

    def to_dict(self) -> dict[str, object]:
        """The record as the report's facts hold it (network.interfaces[]), which from_dict reads back."""
        return {"name": self.name, "state": self.state, "loopback": self.loopback, "addresses": list(self.addresses)}


@dataclass(frozen=True)
class Route:
    """Which interface carries the route to the rendezvous host (or the default route)."""

    destination: str | None = None
    interface: str | None = None
    how: str | None = None
    """'route to 10.0.0.1' | 'default route'"""
    source: str | None = None
    """The address the kernel sends from on that route."""

    @classmethod
    def from_dict(cls, r: Mapping[str, Any]) -> Route:
        return cls(
            destination=typed(r.get("destination"), str, "network.route.destination"),
            interface=typed(r.get("interface"), str, "network.route.interface"),
            how=typed(r.get("how"), str, "network.route.how"),
            source=typed(r.get("source"), str, "network.route.source"),
        )

    def to_dict(self) -> dict[str, object]:
        """The record as the report's facts hold it (network.route), which from_dict reads back."""
        return {"destination": self.destination, "source": self.source, "interface": self.interface, "how": self.how}


@dataclass(frozen=True)
class NetworkFacts:
    interfaces: tuple[Interface, ...]
    route: Route = field(default_factory=Route)
    infiniband: tuple[str, ...] | None = None
    """InfiniBand devices in /sys/class/infiniband; None when not reported."""
    libibverbs: str | None = None
    """The libibverbs found (looked for only with InfiniBand devices)."""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> NetworkFacts:
        net = section(facts, "network")
        ib = typed(net.get("infiniband"), Mapping, "network.infiniband") or {}
        ifaces = typed(net.get("interfaces"), list, "network.interfaces") or []
        return cls(
            interfaces=tuple(Interface.from_dict(typed(i, Mapping, "network.interfaces[]")) for i in ifaces),
            route=Route.from_dict(typed(net.get("route"), Mapping, "network.route") or {}),
            infiniband=_strings(ib.get("devices"), "network.infiniband.devices"),
            libibverbs=typed(ib.get("libibverbs"), str, "network.infiniband.libibverbs"),
        )

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.interfaces]


@dataclass(frozen=True)
class UlimitsFacts:
    memlock_soft_bytes: int | None
    """None: unlimited."""
    nofile_soft: int | None
    infiniband: tuple[str, ...]

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> UlimitsFacts:
        u = section(facts, "ulimits")
        return cls(
            memlock_soft_bytes=typed(u.get("memlock_soft_bytes"), int, "ulimits.memlock_soft_bytes"),
            nofile_soft=typed(u.get("nofile_soft"), int, "ulimits.nofile_soft"),
            infiniband=NetworkFacts.from_env(facts).infiniband or (),
        )


@dataclass(frozen=True)
class ContainerFacts:
    in_container: bool
    kind: str | None
    """'docker' | 'podman' | 'kubernetes' | ...; None outside a container."""
    kubernetes: bool | None
    evidence: tuple[str, ...]
    gpus: GpuFacts

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> ContainerFacts:
        c = section(facts, "container")
        kubernetes = typed(c.get("kubernetes"), bool, "container.kubernetes")
        return cls(
            in_container=bool(c.get("in_container")),
            kind=typed(c.get("kind"), str, "container.kind") or ("kubernetes" if kubernetes else None),
            kubernetes=kubernetes,
            evidence=_strings(c.get("evidence"), "container.evidence") or (),
            gpus=GpuFacts.from_env(facts),
        )


DIST_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED", "GLOO_", "TORCHELASTIC_")
DIST_ENV_NAMES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "OMP_NUM_THREADS",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "NVIDIA_VISIBLE_DEVICES",
)
"""The variables that steer torchrun, torch.distributed, NCCL and CUDA: what the host probe records
(env.probes.system.env_vars) and what an image's config Env is read for, so both judge the same set."""


def _judged_names() -> frozenset[str]:
    """Every name knowledge/variables.yaml has a verdict for (its variables, old names, settings people
    believe in that no library reads, the rank and interface variables): recorded too, whatever their
    prefix, so check, image and lint judge the same names."""
    data = knowledge.load_mapping("variables.yaml")
    names = [str(v["name"]) for v in (*(data.get("variables") or []), *(data.get("beliefs") or []))]
    names += [*(data.get("renamed") or {}), *(data.get("rank_vars") or []), *(data.get("ifname_vars") or [])]
    return frozenset(names)


def dist_env(env: Mapping[str, Any]) -> dict[str, str]:
    judged = _judged_names()
    return {
        str(k): str(v)
        for k, v in sorted(env.items())
        if k in DIST_ENV_NAMES or str(k).startswith(DIST_ENV_PREFIXES) or k in judged
    }


@dataclass(frozen=True)
class NetPlugins:
    """Which NCCL network plugin libraries the loader would find for the target's environment
    (env.probes.nccl_probe.net_plugins, the report's nccl.net_plugins)."""

    names: tuple[str, ...]
    """The library names NCCL tries, in its order (none: NCCL_NET_PLUGIN=none)."""
    searched: tuple[str, ...]
    """Where we looked, in order."""
    found: bool

    @classmethod
    def from_dict(cls, p: Mapping[str, Any]) -> NetPlugins:
        found = typed(p.get("found"), list, "nccl.net_plugins.found")
        return cls(
            names=_strings(p.get("names"), "nccl.net_plugins.names") or (),
            searched=_strings(p.get("searched"), "nccl.net_plugins.searched") or (),
            found=bool(found),
        )


@dataclass(frozen=True)
class VariableContext:
    """What is known about where the variables will be read (checks/variables.py weighs a value against it)."""

    nccl_runs: bool | None = None
    """True: NCCL reads its variables there (a CUDA torch with a GPU, a GPU job); False: it does not
    (CPU torch, no GPU, a CPU job); None: not known (an image, a config that does not say)."""
    gpus_seen: bool | None = None
    """True: GPUs are seen, and the GPU checks judge CUDA_VISIBLE_DEVICES against them."""
    rank_setter: bool | None = None
    """True: a launcher sets RANK / WORLD_SIZE for the ranks (torchrun, an operator); False: nothing
    does (a plain `python train.py`); None: not known."""
    nccl_version: tuple[int, ...] | None = None
    net_plugins: NetPlugins | None = None
    """None: not probed (an older report, an image, a config)."""
    nvlink: bool = False
    infiniband: bool = False
    network: NetworkFacts | None = None
    """The host's interfaces; None where they are the node's, not known here (an image, a config)."""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> VariableContext:
        torch = typed(facts.get("torch"), Mapping, "torch") or {}
        gpus = typed(facts.get("gpus"), Mapping, "gpus") or {}
        seen = any(int(n or 0) > 0 for n in (gpus.get("count"), gpus.get("physical_count"), torch.get("device_count")))
        nccl = typed(facts.get("nccl"), Mapping, "nccl") or {}
        plugins = typed(nccl.get("net_plugins"), Mapping, "nccl.net_plugins")
        network = typed(facts.get("network"), Mapping, "network") or {}
        return cls(
            nccl_runs=str(torch.get("flavour") or "") not in ("", "cpu") and seen,
            gpus_seen=seen,
            nccl_version=version_tuple(nccl.get("version") or torch.get("nccl_version")),
            net_plugins=None if plugins is None else NetPlugins.from_dict(plugins),
            nvlink=any(int(g.get("nvlinks_active") or 0) > 0 for g in gpus.get("all") or [] if isinstance(g, Mapping)),
            infiniband=bool((network.get("infiniband") or {}).get("devices")),
            network=NetworkFacts.from_env(facts),
        )


@dataclass(frozen=True)
class EnvVarsFacts:
    """The environment a job starts with (RANK, MASTER_*, NCCL_* ...) and what is known about where it
    is read (the env_vars and dist_vars units judge it with checks/variables.py)."""

    env: Mapping[str, str] | None
    """None: not known here (a rootfs has no config, see `unknown_why`)."""
    context: VariableContext
    baked: bool = False
    """True for an image's config Env: every container of every job starts with it."""
    unknown_why: str = ""
    every_variable: bool = False
    """True where env_vars shows every variable's verdict (an image, a launch config); False on a host,
    where env.dist_vars shows those of NCCL, torch.distributed and gloo."""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> EnvVarsFacts:
        env = typed(facts.get("env"), Mapping, "env") or {}
        return cls({str(k): str(v) for k, v in env.items()}, VariableContext.from_env(facts))

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> EnvVarsFacts:
        """An image's interfaces, GPUs and NCCL are the node's: nothing about where it runs is known."""
        img = section(facts, "image")
        if img.get("config") is None:
            return cls(
                None, VariableContext(), baked=True, unknown_why="a rootfs has no config Env", every_variable=True
            )
        env = dist_env(typed(img.get("env"), Mapping, "image.env") or {})
        return cls(env, VariableContext(), baked=True, every_variable=True)


@dataclass(frozen=True)
class ShmFacts:
    size_bytes: int | None
    """None: /dev/shm is not there (or could not be read, see `error`)."""
    free_bytes: int | None
    error: str | None = None
    gpus: int | None = None
    """Visible GPUs (one rank each); None when the subject cannot know (sizes for a full node)."""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> ShmFacts:
        s = section(facts, "shm")
        visible = section(facts, "gpus").get("visible")
        return cls(
            size_bytes=int_at(s, "size_bytes", "shm"),
            free_bytes=int_at(s, "free_bytes", "shm"),
            error=str_at(s, "error", "shm"),
            gpus=len(visible) if isinstance(visible, list) and visible else None,
        )


@dataclass(frozen=True)
class UserFacts:
    subject: str
    """Who runs: 'this process', 'the image'."""
    root: bool | None
    """None: not known from this subject (a rootfs has no config)."""
    how: str
    """What shows it: 'uid 0', "User='' in the image config"."""
    observed: Mapping[str, Any] = field(default_factory=dict)
    unknown_why: str = ""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> UserFacts:
        u = section(facts, "user")
        uid = int_at(u, "uid", "user")
        flag = bool_at(u, "root", "user")
        root = flag if flag is not None else (uid == 0 if uid is not None else None)
        name = str_at(u, "name", "user")
        how = f"uid {uid}" if root else f"{name or 'uid'} (uid {uid})"
        return cls("this process", root, how, {"uid": 0 if root else uid})

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> UserFacts:
        cfg = section(facts, "image").get("config")
        if not isinstance(cfg, Mapping):
            return cls("the image", None, "", unknown_why="a rootfs has no config: the user comes from the run command")
        user = str(cfg.get("User") or "")
        root = user.split(":")[0] in ("", "root", "0")
        return cls("the image", root, f"User={user!r} in the image config" if root else user, {"User": user})
