"""Verdicts over an image's facts: can this image run DDP on GPUs, and how should it be started?"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from ddp_doctor import checks
from ddp_doctor.checks import table
from ddp_doctor.report import Result, Status
from ddp_doctor.torchrun import TorchrunCommand
from ddp_doctor.torchrun import argv as torchrun_argv
from ddp_doctor.words import human_bytes, plural

Facts = dict[str, Any]
F = TypeVar("F")


def gpu_flags() -> str:
    return f"--gpus all --shm-size={table.shm().docker_size(None)} --ulimit memlock=-1 --ulimit stack=67108864"


def integrity(f: Facts) -> Result:
    img = f["image"]
    if not img.get("verified_blobs"):
        return Result(
            "image.integrity",
            "Image integrity",
            Status.SKIP,
            f"{img['format']}: {img.get('note', 'no digests to verify')}",
        )
    return Result(
        "image.integrity",
        "Image integrity",
        Status.PASS,
        f"{plural(img['verified_blobs'], 'blob')} match their sha256 digests; {plural(img['layer_count'], 'layer')}, "
        f"{human_bytes(img['uncompressed_bytes'])} uncompressed, {plural(img['entries'], 'entry', 'entries')}",
        observed={"format": img["format"], "layers": img["layer_count"]},
        metrics={"size_bytes": img["uncompressed_bytes"], "layers_count": img["layer_count"]},
    )


def _torch_envs(f: Facts) -> str:
    """Every environment with torch, and which one the audit judged and why."""
    envs = f["torch"].get("environments") or []
    if not envs:
        return ""
    listed = ", ".join(f"{e['prefix']} (torch {e['version'] or '?'})" for e in envs[:6])
    return f"; {plural(len(envs), 'environment')} with torch: {listed}; judged {envs[0]['prefix']} because {f['torch'].get('chosen_because')}"


def python(f: Facts) -> Result:
    py = f["python"]
    broken: dict[str, str] = py.get("broken_interpreters") or {}
    dangling = ", ".join(f"{p} -> {to or '?'}" for p, to in list(broken.items())[:4])
    if not py["interpreters"]:
        return Result(
            "image.python",
            "Python interpreter",
            Status.FAIL,
            f"no working python interpreter in the image: {dangling}, which the image does not contain"
            if broken
            else "no python interpreter in any bin/ directory of the image",
            cause="torchrun and the training script need Python inside the image"
            + (
                "; these are links to an interpreter that was not copied into it (a venv made in a "
                "build stage whose Python stayed behind)"
                if broken
                else ""
            ),
            remedy="build FROM an image with Python (e.g. python:3.12-slim or pytorch/pytorch)"
            + (
                "; in a multi-stage build, copy the venv into a stage with the same Python at the same path"
                if broken
                else ""
            ),
            observed={"interpreters": [], "broken_interpreters": broken},
            expected={"interpreters": ">= 1"},
        )
    torch_env = f["torch"].get("prefix")
    if (
        torch_env
        and py.get("executable") is None
        and any(p.startswith(f"{torch_env.rstrip('/')}/bin/") for p in broken)
    ):
        return Result(
            "image.python",
            "Python interpreter",
            Status.FAIL,
            f"torch's environment {torch_env} has no working interpreter: {dangling}, which the image does not contain",
            cause="the environment's python is a link to an interpreter that was not copied into the image",
            remedy="in a multi-stage build, copy the venv into a stage with the same Python at the same path",
            observed={"interpreters": py["interpreters"], "broken_interpreters": broken},
            expected={"interpreters": f"a working python in {torch_env}/bin"},
        )
    shown = ", ".join(py["interpreters"][:6])
    return Result(
        "image.python",
        "Python interpreter",
        Status.PASS,
        f"{plural(len(py['interpreters']), 'interpreter')}: {shown}; torch's is {py['executable'] or 'unknown'}"
        + _torch_envs(f),
        observed={
            "interpreters": py["interpreters"],
            "site_packages": py["site_packages"],
            "torch_environments": f["torch"].get("environments") or [],
        },
    )


def _cuda_lib(key: str, rid: str, title: str, why: str) -> Callable[[Facts], Result]:
    def rule(f: Facts) -> Result:
        t, lib = f["torch"], f[key]
        if t["flavour"] != "cuda":
            return Result(rid, title, Status.SKIP, "no CUDA build of torch")
        if lib["library"] is None:
            return Result(
                rid,
                title,
                Status.WARN,
                f"no {title} library found for torch {t['version']} (CUDA {t['cuda']})",
                cause=why,
                remedy="use an official torch CUDA wheel (it brings the nvidia-* runtime wheels) or a CUDA runtime base image",
                observed={"library": None},
                expected={"library": "present"},
            )
        return Result(
            rid,
            title,
            Status.PASS,
            f"{title} {lib['version'] or '(version unknown)'} from {lib['source']}: {lib['library']}",
            observed={"library": lib["library"], "version": lib["version"], "source": lib["source"]},
        )

    return rule


cudnn = _cuda_lib("cudnn", "image.cudnn", "cuDNN", "convolutions fail at the first use; DDP itself does not need cuDNN")
cuda_runtime = _cuda_lib(
    "cuda_runtime",
    "image.cuda_runtime",
    "CUDA runtime",
    "`import torch` fails with a missing libcudart unless it is linked in statically",
)


def entrypoint(f: Facts) -> Result:
    cfg = f["image"].get("config")
    if cfg is None:
        return Result("image.entrypoint", "Entrypoint and command", Status.SKIP, "a rootfs has no Entrypoint/Cmd")
    ep, cmd, wd = cfg.get("Entrypoint"), cfg.get("Cmd"), cfg.get("WorkingDir")
    return Result(
        "image.entrypoint",
        "Entrypoint and command",
        Status.PASS,
        f"{_instruction('ENTRYPOINT', ep)}; {_instruction('CMD', cmd)}; WORKDIR {wd or '/'}",
        observed={"Entrypoint": ep, "Cmd": cmd, "WorkingDir": wd, "Labels": cfg.get("Labels") or {}},
    )


def _instruction(name: str, value: object) -> str:
    """An image config's Entrypoint / Cmd as its Dockerfile instruction reads: CMD ["/hello"], or 'no CMD'."""
    if not value:
        return f"no {name}"
    return f"{name} {json.dumps(value)}" if isinstance(value, list) else f"{name} {value}"


def run_command(f: Facts) -> Result:
    name = f["image"].get("name") or "IMAGE"
    launcher = f["torchrun"].get("on_path") and "torchrun" or f["torchrun"].get("path") or "torchrun"
    ep = (f["image"].get("config") or {}).get("Entrypoint")
    entry = " --entrypoint ''" if ep else ""
    train = torchrun_argv(TorchrunCommand("train.py", nproc="gpu", launcher=(launcher,)))
    docker = f"docker run --rm{entry} {gpu_flags()} {name} \\\n  {shlex.join(train)}"
    k8s = (
        "containers:\n"
        f"- name: train\n  image: {name}\n"
        f"  command: {json.dumps(train)}\n"
        "  resources:\n    limits:\n      nvidia.com/gpu: 8\n"
        "  volumeMounts:\n  - {name: dshm, mountPath: /dev/shm}\n"
        "volumes:\n- name: dshm\n  emptyDir: {medium: Memory, sizeLimit: " + table.shm().k8s_size(None) + "}"
    )
    remedy = (
        f"{docker}\n\npodman: replace --gpus all with --device nvidia.com/gpu=all (CDI)\n\nKubernetes:\n{k8s}\n\n"
        f"then verify for real on a GPU node: ddp-doctor check --image {name}"
    )
    return Result(
        "image.run_command",
        "How to run it",
        Status.PASS,
        "start it with GPUs, a large /dev/shm and unlimited locked memory (DataLoader workers and NCCL need both)",
        remedy=remedy,
        observed={"docker": docker, "kubernetes": k8s},
    )


@dataclass(frozen=True)
class ImageSubject:
    """An image as a subject of the checks: the units that name an `image` id, over the facts the
    audit read, by each facts type's `from_image` (a type without one is nothing an image can say)."""

    recorded: Facts
    name: str = "image"

    def facts(self, kind: type[F]) -> F | None:
        read = getattr(kind, "from_image", None)
        return None if read is None else cast(F, read(self.recorded))

    def skipped(self, tags: frozenset[str]) -> str | None:
        return None


# The report's order: the image-only rules, and the ids the shared units answer (checks.evaluate).
RULES: tuple[Callable[[Facts], Result] | str, ...] = (
    integrity,
    python,
    "image.torch",
    "image.official_build",
    "image.nccl",
    cuda_runtime,
    cudnn,
    "image.torchrun",
    "image.user",
    "image.env",
    entrypoint,
    run_command,
)


def evaluate(facts: Facts) -> list[Result]:
    shared = {r.id: r for r in checks.evaluate(ImageSubject(facts))}
    return [
        shared[rule] if isinstance(rule, str) else rule(facts)
        for rule in RULES
        if not isinstance(rule, str) or rule in shared
    ]
