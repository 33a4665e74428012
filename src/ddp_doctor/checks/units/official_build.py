"""Is this torch an official wheel of its release (a variant the release shipped)?"""

from __future__ import annotations

import re

from ddp_doctor import knowledge
from ddp_doctor.checks.facts.software import TorchFacts
from ddp_doctor.checks.install import suggest_variant
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status


def judge(f: TorchFacts) -> Finding:
    """Warns on a custom build: a local version tag or CUDA variant the release never shipped.

    The release table (knowledge/torch_releases.yaml) lists each release's official CUDA
    variants; a source, vendor or third-party build may differ in NCCL, arch list and fixes.
    """
    version = f.version or ""
    if not f.installed or not version:
        return skip("torch is not installed")
    base, _, local = version.partition("+")
    rel = knowledge.release(version)
    if rel is None:
        return skip(
            f"torch {version} is not in the release table (2.0 .. {knowledge.newest_verified()}); cannot judge its variant"
        )
    if f.flavour == "rocm" or local.startswith("rocm"):
        return skip(f"torch {version} is a ROCm build; ROCm variants are not tabulated")
    variant = (
        local if re.fullmatch(r"cu\d+|cpu", local or "") else (knowledge.variant_of(f.cuda) if not local else None)
    )
    official = rel["cuda_variants"]
    listed = ", ".join(official)
    observed = {"version": version, "variant": variant}
    if variant == "cpu":
        return Finding(Status.PASS, f"torch {version} is the official CPU wheel", observed=observed)
    if variant in official:
        return Finding(
            Status.PASS,
            f"torch {version} matches an official wheel (torch {rel['version']} shipped {listed})",
            observed=observed,
            expected={"variants": official},
        )
    what = (
        f"torch {rel['version']} was never shipped for {variant}"
        if variant
        else f"local version '+{local}' is not an official wheel tag (a source or vendor build)"
    )
    wheel = knowledge.install_command(base, suggest_variant(rel, f.install), f.install.python)
    return Finding(
        Status.WARN,
        f"custom build: {what}; official variants: {listed}",
        cause="a source build, a vendor/NGC container build or a third-party wheel: its NCCL, arch list and fixes may differ from the released wheels",
        remedy=f"if this is not intended, install an official wheel:\n{wheel}",
        observed=observed,
        expected={"variants": official},
    )


CHECK = Check(
    name="official_build",
    title="official torch wheel",
    facts=TorchFacts,
    judge=judge,
    ids={"env": "env.official_build", "image": "image.official_build"},
    order=60,
    tags=frozenset({"environment", "torch_build"}),
)
