"""`ddp-doctor image PATH`: read the image (never run it), gather its facts, judge them by the checks (image/subject.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import replace
from typing import TypedDict

from ddp_doctor.image import findings, subject
from ddp_doctor.image.archive import ArchiveInfo, Image, load
from ddp_doctor.image.findings import ImagePythonFacts, ImageTorchFacts, ImageTorchrunFacts, LibFacts
from ddp_doctor.image.limits import Limits
from ddp_doctor.report import Report

_SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE", re.IGNORECASE)


def _redacted(env: dict[str, str]) -> dict[str, str]:
    """Reports get shared (CI artifacts, HTML); values of secret-looking variables stay out of them."""
    return {k: ("<redacted>" if _SECRET.search(k) and v else v) for k, v in env.items()}


class ImageInfo(ArchiveInfo, total=False):
    """facts["image"]: the archive's info and what the audit adds."""

    path: str
    name: str | None
    """The first repo tag, else an OCI ref that names an image; None when the archive names none."""
    path_env: str
    env: dict[str, str]
    """The config's Env, secret-looking values redacted."""
    config: dict[str, object] | None
    """User, Entrypoint, Cmd, WorkingDir, Labels, ExposedPorts of the config (User "" when unset)."""
    architecture: str | None
    os: str | None
    created: str | None
    os_release: str | None
    size_bytes: int | None


class AuditedFacts(TypedDict):
    """The facts `image` reads from an image, in the sections env.facts gives a host (image/subject.py judges them)."""

    image: ImageInfo
    python: ImagePythonFacts
    torch: ImageTorchFacts
    nccl: LibFacts
    cudnn: LibFacts
    cuda_runtime: LibFacts
    torchrun: ImageTorchrunFacts


def facts_of(image: Image, path: str) -> AuditedFacts:
    tree, config = image.tree, image.config
    env = findings.env_of(config)
    path_var = env.get("PATH") or findings.DEFAULT_PATH
    inv = findings.inventory(tree)
    torch = findings.torch_facts(tree, inv, path_var)
    cfg = (config or {}).get("config") if config is not None else None
    tags = image.info.get("repo_tags") or []
    ref = image.info.get("ref")  # an OCI layout's ref.name is often just a tag ("1"), not a name to run
    shown: dict[str, object] | None = None
    if config is not None:
        shown = {k: (cfg or {}).get(k) for k in ("User", "Entrypoint", "Cmd", "WorkingDir", "Labels", "ExposedPorts")}
        shown["User"] = shown["User"] or ""
    added = ImageInfo(
        path=path,
        name=tags[0] if tags else (ref if ref and ("/" in ref or ":" in ref) else None),
        path_env=path_var,
        env=_redacted(env),
        config=shown,
        architecture=(config or {}).get("architecture"),
        os=(config or {}).get("os"),
        created=(config or {}).get("created"),
        os_release=findings.os_release(tree),
        size_bytes=image.info.get("uncompressed_bytes"),
    )
    info: ImageInfo = {**image.info, **added}  # the archive's info first, as read, then what the audit adds
    return AuditedFacts(
        image=info,
        python=findings.python_facts(tree, inv, torch),
        torch=torch,
        nccl=findings.lib_facts(tree, inv, "nccl", "nvidia-nccl", torch, image.markers),
        cudnn=findings.lib_facts(tree, inv, "cudnn", "nvidia-cudnn", torch, image.markers),
        cuda_runtime=findings.lib_facts(tree, inv, "cuda_runtime", "nvidia-cuda-runtime", torch, image.markers),
        torchrun=findings.torchrun_facts(tree, inv, torch, path_var),
    )


def audit(
    path: str,
    platform: str = "linux/amd64",
    limits: Limits | None = None,
    on_layer: Callable[[str, list[int]], None] | None = None,
) -> Report:
    image = load(path, platform, limits, replace(findings.policy(), on_layer=on_layer))
    report = Report(command="image", target={"image": os.path.abspath(path)})
    report.facts = dict(facts_of(image, path))
    nccl = report.facts["nccl"]
    report.facts["torch"]["nccl_version"] = nccl["version"]
    report.facts["torch"]["backends"] = {
        "nccl": nccl["library"] is not None if report.facts["torch"]["flavour"] == "cuda" else False,
        "gloo": report.facts["torch"]["installed"],
        "mpi": None,
    }
    report.extend(subject.evaluate(report.facts))
    return report
