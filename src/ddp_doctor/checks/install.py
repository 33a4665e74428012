"""Which official torch wheel to install, and the pip command for it, from the release tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ddp_doctor import knowledge
from ddp_doctor.checks.facts.software import InstallTarget


def py_fits(rel: Mapping[str, Any], py: str) -> bool:
    bounds = rel.get("python") or []
    if len(bounds) != 2:
        return True
    v = knowledge.version_tuple(py)[:2]
    return knowledge.version_tuple(bounds[0])[:2] <= v <= knowledge.version_tuple(bounds[1])[:2]


def fits_driver(variant: str, driver_cuda: str | None) -> bool:
    cuda = knowledge.cuda_of(variant)
    return (
        bool(cuda and driver_cuda)
        and knowledge.version_tuple(cuda or "")[:2] <= knowledge.version_tuple(driver_cuda or "")[:2]
    )


def suggest_variant(rel: Mapping[str, Any], target: InstallTarget) -> str:
    """The official wheel to install: the newest CUDA the driver can run, or CPU without GPUs."""
    variants = list(rel.get("cuda_variants") or [])
    if not target.has_gpus or not variants:
        return "cpu"
    fitting = [v for v in variants if fits_driver(v, target.driver_cuda)]
    return str(fitting[-1] if fitting else variants[0])


def _newest_fitting(target: InstallTarget) -> str:
    keys = sorted(knowledge.releases(), key=knowledge.version_tuple, reverse=True)
    fitting = [k for k in keys if py_fits(knowledge.release(k) or {}, target.python_version or "3.12")] or keys
    if not target.has_gpus:
        return fitting[0]
    runs = (
        k
        for k in fitting
        if any(fits_driver(v, target.driver_cuda) for v in (knowledge.release(k) or {}).get("cuda_variants", []))
    )
    return next(runs, fitting[0])


def install_for(target: InstallTarget, torch_version: str | None = None) -> str:
    """The install command for this interpreter: the given release, or the newest one that fits
    this Python and (with GPUs) this driver."""
    if torch_version and knowledge.release(torch_version):
        rel = knowledge.release(torch_version) or {}
        return knowledge.install_command(torch_version.split("+")[0], suggest_variant(rel, target), target.python)
    chosen = _newest_fitting(target)
    rel = knowledge.release(chosen) or {}
    return knowledge.install_command(f"{chosen}.*", suggest_variant(rel, target), target.python)
