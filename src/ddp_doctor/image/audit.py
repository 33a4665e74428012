"""`ddp-doctor image PATH`: read the image (never run it), gather its facts, judge them by the checks (image/subject.py)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ddp_doctor.image import findings, subject
from ddp_doctor.image.archive import Image, load
from ddp_doctor.image.limits import Limits
from ddp_doctor.report import Report

_SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE", re.IGNORECASE)


def _redacted(env: dict[str, str]) -> dict[str, str]:
    """Reports get shared (CI artifacts, HTML); values of secret-looking variables stay out of them."""
    return {k: ("<redacted>" if _SECRET.search(k) and v else v) for k, v in env.items()}


def facts_of(image: Image, path: str) -> dict[str, Any]:
    tree, config = image.tree, image.config
    env = findings.env_of(config)
    path_var = env.get("PATH") or findings.DEFAULT_PATH
    inv = findings.inventory(tree)
    torch = findings.torch_facts(tree, inv, path_var)
    cfg = (config or {}).get("config") if config is not None else None
    info: dict[str, Any] = dict(image.info)  # facts["image"]: the archive's info and what the audit adds
    tags = info.get("repo_tags") or []
    ref = info.get("ref")  # an OCI layout's ref.name is often just a tag ("1"), not a name to run
    info.update(
        path=path,
        name=tags[0] if tags else (ref if ref and ("/" in ref or ":" in ref) else None),
        path_env=path_var,
        env=_redacted(env),
        config=None
        if config is None
        else {k: (cfg or {}).get(k) for k in ("User", "Entrypoint", "Cmd", "WorkingDir", "Labels", "ExposedPorts")},
        architecture=(config or {}).get("architecture"),
        os=(config or {}).get("os"),
        created=(config or {}).get("created"),
        os_release=findings.os_release(tree),
        size_bytes=info.get("uncompressed_bytes"),
    )
    if info["config"] is not None and info["config"].get("User") is None:
        info["config"]["User"] = ""
    return {
        "image": info,
        "python": findings.python_facts(tree, inv, torch),
        "torch": torch,
        "nccl": findings.lib_facts(tree, inv, "nccl", "nvidia-nccl", torch, image.markers),
        "cudnn": findings.lib_facts(tree, inv, "cudnn", "nvidia-cudnn", torch, image.markers),
        "cuda_runtime": findings.lib_facts(tree, inv, "cuda_runtime", "nvidia-cuda-runtime", torch, image.markers),
        "torchrun": findings.torchrun_facts(tree, inv, torch, path_var),
    }


def audit(
    path: str,
    platform: str = "linux/amd64",
    limits: Limits | None = None,
    on_layer: Callable[[str, list[int]], None] | None = None,
) -> Report:
    image = load(path, platform, limits, replace(findings.policy(), on_layer=on_layer))
    report = Report(command="image", target={"image": os.path.abspath(path)})
    report.facts = facts_of(image, path)
    nccl = report.facts["nccl"]
    report.facts["torch"]["nccl_version"] = nccl["version"]
    report.facts["torch"]["backends"] = {
        "nccl": nccl["library"] is not None if report.facts["torch"]["flavour"] == "cuda" else False,
        "gloo": report.facts["torch"]["installed"],
        "mpi": None,
    }
    report.extend(subject.evaluate(report.facts))
    return report
