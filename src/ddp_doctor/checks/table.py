"""The knowledge table shared by the checks (checks/knowledge.yaml), as frozen records.

Thresholds and remedies that `check`, `image`, `launch` and `lint` must agree on are read from here
and nowhere else; each entry in the YAML names its sources.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ddp_doctor.words import plural

GiB = 1 << 30
MiB = 1 << 20


@functools.cache
def _load() -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(resources.files(__package__).joinpath("knowledge.yaml").read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise TypeError("checks/knowledge.yaml is not a mapping")
    return data


def size_text(n: int | None) -> str:
    """1.5 GiB / 64 MiB; 'unknown' for None."""
    if n is None:
        return "unknown"
    if n >= GiB:
        return f"{n / GiB:.1f} GiB"
    return f"{n / MiB:.0f} MiB"


@dataclass(frozen=True)
class ShmRule:
    """How big /dev/shm must be, and how to make it so."""

    fail_below_bytes: int
    warn_below_bytes: int
    container_default_bytes: int
    per_gpu_bytes: int
    gpus_when_unknown: int
    why: str
    sources: tuple[str, ...]

    def recommended_bytes(self, gpus: int | None) -> int:
        """per_gpu_bytes per GPU; a subject that does not know its GPU count sizes for a full node."""
        n = gpus if gpus else self.gpus_when_unknown
        return self.per_gpu_bytes * max(1, n)

    def docker_size(self, gpus: int | None) -> str:
        """`--shm-size` value: '32g'."""
        return f"{self.recommended_bytes(gpus) // GiB}g"

    def k8s_size(self, gpus: int | None) -> str:
        """emptyDir sizeLimit: '32Gi'."""
        return f"{self.recommended_bytes(gpus) // GiB}Gi"

    def rule_text(self, gpus: int | None) -> str:
        per = self.per_gpu_bytes // GiB
        if gpus:
            return f"{per} GiB per GPU: {self.docker_size(gpus)} for {plural(gpus, 'GPU')}"
        return f"{per} GiB per GPU: {self.docker_size(gpus)} for a node of {self.gpus_when_unknown} GPUs"

    def words(self, gpus: int | None) -> dict[str, str]:
        """Placeholders for rule texts kept elsewhere (deploy/lint/rules.yaml): `{shm_docker}` etc."""
        return {
            "shm_docker": self.docker_size(gpus),
            "shm_kubernetes": self.k8s_size(gpus),
            "shm_compose": f"{self.recommended_bytes(gpus) // GiB}gb",
            "shm_rule": self.rule_text(gpus),
            "shm_min": size_text(self.warn_below_bytes),
            "shm_runtime_default": size_text(self.container_default_bytes),
        }

    def remedy(self, gpus: int | None) -> str:
        d, k = self.docker_size(gpus), self.k8s_size(gpus)
        return (
            f"give the container a bigger /dev/shm ({self.rule_text(gpus)}):\n"
            f"docker run --shm-size={d} ...   (or --ipc=host to share the host's /dev/shm)\n"
            f"podman run --shm-size={d} ...\n"
            "Kubernetes: mount a memory-backed emptyDir at /dev/shm (it counts against the memory limit):\n"
            "  volumes:\n"
            "    - name: dshm\n"
            f"      emptyDir: {{medium: Memory, sizeLimit: {k}}}\n"
            "  containers:\n"
            "    - volumeMounts:\n"
            "        - {name: dshm, mountPath: /dev/shm}"
        )


@dataclass(frozen=True)
class NonRootRule:
    why: str
    dockerfile: str
    k8s: str
    docker: str
    sources: tuple[str, ...]

    def remedy(self) -> str:
        dockerfile = self.dockerfile.replace("\n", "\n             ")
        return f"run as an unprivileged user:\nDockerfile:  {dockerfile}\nKubernetes:  {self.k8s}\n{self.docker}"


@functools.cache
def shm() -> ShmRule:
    e = _load()["shm"]
    return ShmRule(
        fail_below_bytes=int(e["fail_below_bytes"]),
        warn_below_bytes=int(e["warn_below_bytes"]),
        container_default_bytes=int(e["container_default_bytes"]),
        per_gpu_bytes=int(e["per_gpu_bytes"]),
        gpus_when_unknown=int(e["gpus_when_unknown"]),
        why=str(e["why"]),
        sources=tuple(e["sources"]),
    )


@functools.cache
def non_root() -> NonRootRule:
    e = _load()["non_root"]
    r = e["remedy"]
    return NonRootRule(
        why=str(e["why"]),
        dockerfile=str(r["dockerfile"]),
        k8s=str(r["k8s"]),
        docker=str(r["docker"]),
        sources=tuple(e["sources"]),
    )


@dataclass(frozen=True)
class GpuRuntimeRule:
    remedy: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class GpuBusyRule:
    memory_bytes: int
    util_pct: float
    sources: tuple[str, ...]


@dataclass(frozen=True)
class UlimitsRule:
    nofile_warn_below: int
    nofile_remedy: str
    memlock_cause: str
    memlock_remedy: str
    sources: tuple[str, ...]


@functools.cache
def ulimits() -> UlimitsRule:
    e = _load()["ulimits"]
    return UlimitsRule(
        nofile_warn_below=int(e["nofile_warn_below"]),
        nofile_remedy=str(e["nofile_remedy"]),
        memlock_cause=str(e["memlock_cause"]),
        memlock_remedy=str(e["memlock_remedy"]),
        sources=tuple(e["sources"]),
    )


@functools.cache
def gpu_runtime() -> GpuRuntimeRule:
    e = _load()["gpu_runtime"]
    return GpuRuntimeRule(remedy=str(e["remedy"]), sources=tuple(e["sources"]))


@functools.cache
def gpu_busy() -> GpuBusyRule:
    e = _load()["gpu_busy"]
    return GpuBusyRule(memory_bytes=int(e["memory_bytes"]), util_pct=float(e["util_pct"]), sources=tuple(e["sources"]))


def words(gpus: int | None = None) -> dict[str, str]:
    """Every shared placeholder a rule text may use: the /dev/shm sizes and the non-root reason."""
    return {**shm().words(gpus), "non_root_why": non_root().why}
