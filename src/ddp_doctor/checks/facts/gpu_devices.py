"""Typed facts about this host's GPUs (NVML), read from the report's `gpus` / `gpu_baseline` /
`topology` sections. Only `check` on a host has them: an image or a config has no GPU to ask.

As in facts.software, the `from_*` adapters are the only code that knows the JSON shape, and a
field of the wrong type raises (`typed`), so the checks reading it end as `error` Results.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddp_doctor.checks.facts.fields import required, section, typed
from ddp_doctor.checks.facts.software import InstallTarget, TorchFacts


def _records(value: Any, what: str) -> list[Mapping[str, Any]]:
    items = typed(value, list, what) or []
    for item in items:
        typed(item, Mapping, f"an entry of {what}")
    return list(items)


@dataclass(frozen=True)
class GpuProcess:
    """A compute process NVML lists on a GPU (field order is the report's)."""

    pid: int
    used_bytes: int | None
    name: str | None = None
    container: str | None = None

    @classmethod
    def from_dict(cls, p: Mapping[str, Any]) -> GpuProcess:
        return cls(
            pid=required(p.get("pid"), int, "gpus.visible[].processes[].pid"),
            used_bytes=typed(p.get("used_bytes"), int, "gpus.visible[].processes[].used_bytes"),
            name=typed(p.get("name"), str, "gpus.visible[].processes[].name"),
            container=typed(p.get("container"), str, "gpus.visible[].processes[].container"),
        )


@dataclass(frozen=True)
class GpuDevice:
    index: int
    name: str | None
    uuid: str | None = None
    memory_bytes: int | None = None
    compute_capability: str | None = None
    """'9.0'; None when NVML did not say."""
    mig_mode: str | None = None
    memory_used_bytes: int | float | None = None
    util_pct: int | float | None = None
    processes: tuple[GpuProcess, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuDevice:
        w = "gpus.visible[]"
        return cls(
            index=required(d.get("index"), int, f"{w}.index"),
            name=typed(d.get("name"), str, f"{w}.name"),
            uuid=typed(d.get("uuid"), str, f"{w}.uuid"),
            memory_bytes=typed(d.get("memory_bytes"), int, f"{w}.memory_bytes"),
            compute_capability=typed(d.get("compute_capability"), str, f"{w}.compute_capability"),
            mig_mode=typed(d.get("mig_mode"), str, f"{w}.mig_mode"),
            memory_used_bytes=typed(d.get("memory_used_bytes"), (int, float), f"{w}.memory_used_bytes"),
            util_pct=typed(d.get("util_pct"), (int, float), f"{w}.util_pct"),
            processes=tuple(GpuProcess.from_dict(p) for p in _records(d.get("processes"), f"{w}.processes")),
        )


@dataclass(frozen=True)
class GpuPair:
    """NVML's peer-to-peer answer for two GPUs (field order is the report's)."""

    a: int
    b: int
    p2p_read: str | None
    """'ok', 'not supported', ...; None when NVML did not answer."""
    p2p_nvlink: str | None
    path: str | None

    @classmethod
    def from_dict(cls, p: Mapping[str, Any]) -> GpuPair:
        return cls(
            a=required(p.get("a"), int, "topology.pairs[].a"),
            b=required(p.get("b"), int, "topology.pairs[].b"),
            p2p_read=typed(p.get("p2p_read"), str, "topology.pairs[].p2p_read"),
            p2p_nvlink=typed(p.get("p2p_nvlink"), str, "topology.pairs[].p2p_nvlink"),
            path=typed(p.get("path"), str, "topology.pairs[].path"),
        )


@dataclass(frozen=True)
class GpuFacts:
    """What NVML said about this host's GPUs (one snapshot)."""

    driver_loaded: bool
    nvml_missing: bool = False
    """The doctor's own nvidia-ml-py is missing: NVML was never asked."""
    error: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    """The newest CUDA the driver runs ('12.8')."""
    physical_count: int = 0
    visible: tuple[GpuDevice, ...] = ()
    """The GPUs CUDA sees (after CUDA_VISIBLE_DEVICES)."""
    all: tuple[GpuDevice, ...] = ()
    cuda_visible_devices: str | None = None
    device_nodes: tuple[str, ...] = ()
    pairs: tuple[GpuPair, ...] = ()

    @classmethod
    def from_section(cls, g: Mapping[str, Any], pairs: Any = None) -> GpuFacts:
        nodes = typed(g.get("device_nodes"), list, "gpus.device_nodes") or []
        return cls(
            driver_loaded=bool(g.get("driver_loaded")),
            nvml_missing=bool(g.get("nvml_missing")),
            error=typed(g.get("error"), str, "gpus.error"),
            driver_version=typed(g.get("driver_version"), str, "gpus.driver_version"),
            cuda_driver_version=typed(g.get("cuda_driver_version"), str, "gpus.cuda_driver_version"),
            physical_count=int(typed(g.get("physical_count"), int, "gpus.physical_count") or 0),
            visible=tuple(GpuDevice.from_dict(d) for d in _records(g.get("visible"), "gpus.visible")),
            all=tuple(GpuDevice.from_dict(d) for d in _records(g.get("all"), "gpus.all")),
            cuda_visible_devices=typed(g.get("cuda_visible_devices"), str, "gpus.cuda_visible_devices"),
            device_nodes=tuple(typed(n, str, "gpus.device_nodes[]") for n in nodes),
            pairs=tuple(GpuPair.from_dict(p) for p in _records(pairs, "topology.pairs")),
        )

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> GpuFacts:
        g = section(facts, "gpus")
        return cls.from_section(g, section(facts, "topology").get("pairs") or g.get("topology") or [])

    @property
    def numbered_nodes(self) -> tuple[str, ...]:
        """/dev/nvidia0, /dev/nvidia1 ... (not nvidiactl / nvidia-uvm): one per GPU passed in."""
        return tuple(n for n in self.device_nodes if n[len("/dev/nvidia") :].isdigit())


@dataclass(frozen=True)
class GpusFacts:
    """What env.gpus reads: NVML's answer and the interpreter to install nvidia-ml-py into."""

    gpus: GpuFacts
    python: str

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> GpusFacts:
        return cls(GpuFacts.from_env(facts), InstallTarget.from_env(facts).python)


@dataclass(frozen=True)
class TorchOnGpuFacts:
    """The torch build against the driver and the GPUs: env.driver_cuda and env.gpu_arch."""

    torch: TorchFacts
    gpus: GpuFacts

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> TorchOnGpuFacts:
        return cls(TorchFacts.from_env(facts), GpuFacts.from_env(facts))


@dataclass(frozen=True)
class ExpectedGpusFacts:
    """Signs that GPUs are meant to be here, beside what CUDA sees (env.gpus.expected)."""

    gpus: GpuFacts
    in_container: bool
    nvidia_visible_devices: str | None
    """NVIDIA_VISIBLE_DEVICES as set (CUDA base images and the NVIDIA runtime set it)."""
    expect_gpus: int | None
    """`--expect-gpus N`; None when not given."""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> ExpectedGpusFacts:
        env = section(facts, "env")
        return cls(
            gpus=GpuFacts.from_env(facts),
            in_container=bool(section(facts, "container").get("in_container")),
            nvidia_visible_devices=typed(env.get("NVIDIA_VISIBLE_DEVICES"), str, "env.NVIDIA_VISIBLE_DEVICES"),
            expect_gpus=typed(facts.get("expect_gpus"), int, "expect_gpus"),
        )


@dataclass(frozen=True)
class BusyFacts:
    """The GPUs as NVML saw them before the chain started (or now, for `check --static`)."""

    gpus: GpuFacts
    when: str
    """'before the chain' | 'now'"""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> BusyFacts:
        before = section(facts, "gpu_baseline") or section(facts, "gpus")
        return cls(GpuFacts.from_section(before), "before the chain" if facts.get("gpu_baseline") else "now")
