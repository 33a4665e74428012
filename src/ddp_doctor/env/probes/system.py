"""The fast facts that need neither torch nor a GPU: interpreter, torchrun, /dev/shm, ulimits,
container, user, environment variables. Each reads files or syscalls; none starts a process."""

from __future__ import annotations

import glob
import os
import pwd
import resource
import shutil
import sys
from pathlib import Path
from typing import TypedDict

from ddp_doctor.checks.facts.host import dist_env
from ddp_doctor.env.probes import interp_child
from ddp_doctor.env.probes.interp_child import PythonJson
from ddp_doctor.env.probes.interpreters import same_environment, shebang_python

SHM_PATH = "/dev/shm"


# What each probe writes into its section of the host facts (the report's JSON; checks/facts reads it).
class TorchrunProbe(TypedDict):
    path: str | None
    shebang_python: str | None
    same_env: bool | None
    """Whether the torchrun on PATH runs the target interpreter."""
    env_script: str | None
    """The target environment's own torchrun, when it has one."""


class ShmProbe(TypedDict):
    path: str
    size_bytes: int | None
    free_bytes: int | None
    error: str | None


class UlimitsProbe(TypedDict):
    memlock_soft_bytes: int | None
    memlock_hard_bytes: int | None
    nofile_soft: int | None
    nofile_hard: int | None
    """None: unlimited."""


class ContainerProbe(TypedDict):
    in_container: bool
    kind: str | None
    kubernetes: bool
    evidence: list[str]


class UserProbe(TypedDict):
    uid: int
    gid: int
    name: str | None
    root: bool


class InfinibandProbe(TypedDict):
    devices: list[str]
    libibverbs: str | None


def python() -> PythonJson:
    """The doctor's own interpreter (the target's: `target.describe(t)["python"]`)."""
    return interp_child.python_facts()


def torchrun(python: str | None = None) -> TorchrunProbe:
    """The torchrun on PATH and whether it runs `python` (the target interpreter; default: the doctor's)."""
    python = python or sys.executable
    path = shutil.which("torchrun")
    own = Path(python).parent / "torchrun"
    facts = TorchrunProbe(path=path, shebang_python=None, same_env=None, env_script=str(own) if own.is_file() else None)
    if path:
        shebang = facts["shebang_python"] = shebang_python(Path(path))
        facts["same_env"] = same_environment(shebang, python) if shebang else None
    return facts


def shm() -> ShmProbe:
    facts = ShmProbe(path=SHM_PATH, size_bytes=None, free_bytes=None, error=None)
    try:
        st = os.statvfs(SHM_PATH)
    except OSError as exc:
        facts["error"] = f"{SHM_PATH}: {exc.strerror or exc}"
        return facts
    facts["size_bytes"] = st.f_frsize * st.f_blocks
    facts["free_bytes"] = st.f_frsize * st.f_bavail
    return facts


def _limit(value: int) -> int | None:
    return None if value == resource.RLIM_INFINITY else int(value)


def ulimits() -> UlimitsProbe:
    memlock = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    return UlimitsProbe(
        memlock_soft_bytes=_limit(memlock[0]),
        memlock_hard_bytes=_limit(memlock[1]),
        nofile_soft=_limit(nofile[0]),
        nofile_hard=_limit(nofile[1]),
    )


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def container() -> ContainerProbe:
    evidence: list[str] = []
    kind: str | None = None
    if Path("/.dockerenv").exists():
        kind = "docker"
        evidence.append("/.dockerenv exists")
    if Path("/run/.containerenv").exists():
        kind = "podman"
        evidence.append("/run/.containerenv exists")
    cgroup = _read("/proc/1/cgroup")
    for marker, name in (
        ("kubepods", "kubernetes"),
        ("docker", "docker"),
        ("libpod", "podman"),
        ("containerd", "containerd"),
    ):
        if marker in cgroup:
            evidence.append(f"/proc/1/cgroup mentions {marker}")
            kind = kind or name
    kubernetes = "KUBERNETES_SERVICE_HOST" in os.environ or "kubepods" in cgroup
    if "KUBERNETES_SERVICE_HOST" in os.environ:
        evidence.append("KUBERNETES_SERVICE_HOST is set")
    if kind is None and os.environ.get("container"):
        kind = os.environ["container"]
        evidence.append(f"container={kind} in the environment")
    return ContainerProbe(
        in_container=kind is not None or kubernetes, kind=kind, kubernetes=kubernetes, evidence=evidence
    )


def user() -> UserProbe:
    uid = os.geteuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None
    return UserProbe(uid=uid, gid=os.getegid(), name=name, root=uid == 0)


def env_vars() -> dict[str, str]:
    """The variables that steer torchrun / torch.distributed / NCCL / CUDA (checks.facts.host.dist_env)."""
    return dist_env(os.environ)


def infiniband() -> InfinibandProbe:
    devices = (
        sorted(p.name for p in Path("/sys/class/infiniband").glob("*"))
        if Path("/sys/class/infiniband").is_dir()
        else []
    )
    verbs = None
    if devices:
        for pattern in (
            "/usr/lib/x86_64-linux-gnu/libibverbs.so*",
            "/usr/lib/aarch64-linux-gnu/libibverbs.so*",
            "/usr/lib64/libibverbs.so*",
            "/usr/lib/libibverbs.so*",
            "/lib/x86_64-linux-gnu/libibverbs.so*",
        ):
            hits = sorted(glob.glob(pattern))
            if hits:
                verbs = hits[0]
                break
    return InfinibandProbe(devices=devices, libibverbs=verbs)
