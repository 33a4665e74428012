"""The launch targets: name -> the translator's render(spec) -> text."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ddp_doctor.deploy.spec import LaunchSpec

TARGETS = ("docker", "compose", "k8s", "pytorchjob", "jobset", "trainjob", "slurm")


def renderer(target: str) -> Callable[[LaunchSpec], str]:
    module = importlib.import_module(f"ddp_doctor.deploy.{target}")
    return module.render  # type: ignore[no-any-return]


def render(spec: LaunchSpec, target: str) -> str:
    return renderer(target)(spec)
