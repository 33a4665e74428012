"""How to start an image for distributed training: docker, podman and Kubernetes, with torchrun."""

from __future__ import annotations

import json
import shlex

from ddp_doctor.checks import table
from ddp_doctor.checks.facts.image_only import RunAdviceFacts
from ddp_doctor.checks.model import Check, Finding
from ddp_doctor.report import Status
from ddp_doctor.torchrun import TorchrunCommand
from ddp_doctor.torchrun import argv as torchrun_argv


def gpu_flags() -> str:
    return f"--gpus all --shm-size={table.shm().docker_size(None)} --ulimit memlock=-1 --ulimit stack=67108864"


def judge(f: RunAdviceFacts) -> Finding:
    """Advises the command that starts the image with its GPUs, a /dev/shm sized for a full node
    (checks/knowledge.yaml `shm`) and unlimited locked memory, with torchrun as the image has it; the
    Kubernetes container the same; then `check --image` to verify it on a GPU node.

    Why: Docker and podman give a container 64 MiB of /dev/shm and a small memlock limit by default,
    too little for DataLoader workers and NCCL.
    """
    name = f.name or "IMAGE"
    entry = " --entrypoint ''" if f.has_entrypoint else ""
    train = torchrun_argv(TorchrunCommand("train.py", nproc="gpu", launcher=(f.launcher,)))
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
    return Finding(
        Status.PASS,
        "start it with GPUs, a large /dev/shm and unlimited locked memory (DataLoader workers and NCCL need both)",
        remedy=remedy,
        observed={"docker": docker, "kubernetes": k8s},
    )


CHECK = Check(
    name="run_command",
    title="How to run it",
    facts=RunAdviceFacts,
    judge=judge,
    ids={"image": "image.run_command"},
    order=310,
)
