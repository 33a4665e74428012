"""Typed facts only an image can say: how it was stored and verified, its config's Entrypoint / Cmd,
the interpreters its bin/ directories hold, the CUDA libraries beside torch, and what its run
command needs. Read once from the facts dict of `image.audit.facts_of` by each record's
`from_image`; a host has none of these (no `from_env`), so the units over them run on images only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ddp_doctor.checks.facts.fields import int_at, nonempty, required_at, section, str_at, typed, typed_at

_CONFIG = "image config"  # the config's keys are Docker's (Entrypoint, Cmd), not the report's


def _strings(value: Any, what: str) -> tuple[str, ...]:
    return tuple(typed(item, str, f"{what}[]") for item in typed(value, list, what) or ())


@dataclass(frozen=True)
class StoredImageFacts:
    """How the image was stored and what of it was verified against its digests."""

    format: str
    """'docker-archive', 'oci-layout', 'rootfs-dir', ...: what was read."""
    verified_blobs: int
    """Blobs whose sha256 matched their digest; 0 when the format carries none (a rootfs)."""
    note: str | None
    layer_count: int | None
    uncompressed_bytes: int | None
    entries: int | None

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> StoredImageFacts:
        img = section(facts, "image")
        return cls(
            format=required_at(img, "format", str, "image"),
            verified_blobs=int_at(img, "verified_blobs", "image") or 0,
            note=str_at(img, "note", "image"),
            layer_count=int_at(img, "layer_count", "image"),
            uncompressed_bytes=int_at(img, "uncompressed_bytes", "image"),
            entries=int_at(img, "entries", "image"),
        )


@dataclass(frozen=True)
class ImageConfigFacts:
    """The image config's fields that say how a container starts (as `docker inspect` shows them)."""

    present: bool
    """False for a rootfs: it has no config (no Entrypoint, Cmd or User)."""
    entrypoint: str | list[str] | None = None
    cmd: str | list[str] | None = None
    working_dir: str | None = None
    labels: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> ImageConfigFacts:
        cfg = typed_at(section(facts, "image"), "config", Mapping, "image")
        if cfg is None:
            return cls(present=False)
        return cls(
            present=True,
            entrypoint=typed_at(cfg, "Entrypoint", (str, list), _CONFIG),
            cmd=typed_at(cfg, "Cmd", (str, list), _CONFIG),
            working_dir=typed_at(cfg, "WorkingDir", str, _CONFIG),
            labels=dict(typed_at(cfg, "Labels", Mapping, _CONFIG) or {}),
        )


@dataclass(frozen=True)
class InterpretersFacts:
    """The Python interpreters in the image's bin/ directories, and the environment torch is in."""

    interpreters: tuple[str, ...]
    """Working interpreters (a link whose target exists)."""
    broken: Mapping[str, str | None]
    """Interpreter links whose target the image does not contain: path -> target."""
    executable: str | None
    """The interpreter of torch's environment; None when none was found there."""
    site_packages: tuple[str, ...]
    torch_prefix: str | None
    torch_environments: tuple[Mapping[str, Any], ...] = ()
    """Every environment with torch (prefix, version, ...), the judged one first."""
    chosen_because: str | None = None

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> InterpretersFacts:
        py, torch = section(facts, "python"), section(facts, "torch")
        envs = typed(torch.get("environments"), list, "torch.environments") or []
        return cls(
            interpreters=_strings(required_at(py, "interpreters", list, "python"), "python.interpreters"),
            broken=dict(typed(py.get("broken_interpreters"), Mapping, "python.broken_interpreters") or {}),
            executable=str_at(py, "executable", "python"),
            site_packages=_strings(py.get("site_packages"), "python.site_packages"),
            torch_prefix=str_at(torch, "prefix", "torch"),
            torch_environments=tuple(typed(e, Mapping, "torch.environments[]") for e in envs),
            chosen_because=nonempty(torch.get("chosen_because")),
        )


@dataclass(frozen=True)
class CudaLibFacts:
    """A CUDA library torch loads at run time, as found in the image (`SECTION` names which)."""

    SECTION: ClassVar[str] = ""
    flavour: str | None
    """torch's build: 'cuda' | 'rocm' | 'cpu'."""
    torch_version: str | None
    torch_cuda: str | None
    library: str | None
    """The library's path in the image; None when none was found."""
    version: str | None
    source: str | None
    """Where it came from: 'torch/lib', an nvidia-* wheel, 'system'."""

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> CudaLibFacts:
        torch, lib = section(facts, "torch"), section(facts, cls.SECTION)
        return cls(
            flavour=str_at(torch, "flavour", "torch"),
            torch_version=str_at(torch, "version", "torch"),
            torch_cuda=str_at(torch, "cuda", "torch"),
            library=str_at(lib, "library", cls.SECTION),
            version=str_at(lib, "version", cls.SECTION),
            source=str_at(lib, "source", cls.SECTION),
        )


class CudnnFacts(CudaLibFacts):
    SECTION = "cudnn"


class CudaRuntimeFacts(CudaLibFacts):
    SECTION = "cuda_runtime"


@dataclass(frozen=True)
class RunAdviceFacts:
    """What the advised run command depends on: the image's name, its torchrun, its Entrypoint."""

    name: str | None
    """The reference to run (a repo tag); None when the image names none."""
    launcher: str
    """How to call torchrun inside it: 'torchrun' when PATH finds it, else its path."""
    has_entrypoint: bool
    """An Entrypoint would swallow the command, so the advice clears it."""

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> RunAdviceFacts:
        img, runner = section(facts, "image"), section(facts, "torchrun")
        cfg = typed_at(img, "config", Mapping, "image") or {}
        return cls(
            name=str_at(img, "name", "image"),
            launcher="torchrun" if runner.get("on_path") else str_at(runner, "path", "torchrun") or "torchrun",
            has_entrypoint=bool(cfg.get("Entrypoint")),
        )
