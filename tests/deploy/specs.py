"""The launch specs behind the golden files: 1 node x 1 GPU, 1 x 8, 4 x 8 (+ an elastic script run)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import FIXTURES

GOLDEN = FIXTURES / "deploy" / "golden"
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
EXT = {
    "docker": "sh",
    "compose": "yaml",
    "k8s": "yaml",
    "pytorchjob": "yaml",
    "jobset": "yaml",
    "trainjob": "yaml",
    "slurm": "sbatch",
}
KUBERNETES = ("k8s", "pytorchjob", "jobset", "trainjob")

# name -> launch flags (every one a real `ddp-doctor launch` command line)
SPECS: dict[str, list[str]] = {
    "1x1": ["--image", IMAGE, "--gpus-per-node", "1", "--name", "doctor-1x1"],
    "1x8": ["--image", IMAGE, "--name", "doctor-1x8", "--data", "/datasets/imagenet:/data:ro"],
    "4x8": ["--image", IMAGE, "--nodes", "4", "--name", "doctor-4x8", "--env", "NCCL_SOCKET_IFNAME=eth0"],
    "4x8-elastic-script": [
        "--image",
        IMAGE,
        "--nodes",
        "4",
        "--min-nodes",
        "2",
        "--name",
        "train-4x8",
        "--shm-size",
        "64g",
        "--memory",
        "512g",
        "--script",
        "train.py",
        "--",
        "--epochs",
        "3",
    ],
    # The script under `ddp-doctor run` with a preflight: the failure policies of each Kubernetes kind.
    "2x8-watch-preflight": [
        "--image",
        IMAGE,
        "--nodes",
        "2",
        "--name",
        "train-2x8",
        "--script",
        "train.py",
        "--watch",
        "--preflight",
        "--",
        "--epochs",
        "3",
    ],
}
TARGETS = tuple(EXT)
# Which targets take a spec when not all do (launch refuses the others, each with its reason).
ONLY = {
    "4x8-elastic-script": ("docker", "compose", "k8s", "pytorchjob", "slurm"),  # JobSet/TrainJob: fixed pod count
    "2x8-watch-preflight": (
        "docker",
        "compose",
        "k8s",
        "jobset",
        "trainjob",
        "slurm",
    ),  # a PyTorchJob has no podFailurePolicy
}
CASES = [(s, t) for s in SPECS for t in TARGETS if t in ONLY.get(s, TARGETS)]


def golden_path(spec: str, target: str) -> Path:
    return GOLDEN / spec / f"{target}.{EXT[target]}"


def extra_flags(spec: str, target: str) -> list[str]:
    # Kubernetes reads mounts as hostPath / PVC; the other targets as host paths.
    if spec == "1x8" and target in KUBERNETES:
        return ["--logs", "pvc:doctor-logs:/logs"]
    if target == "slurm":
        return ["--container-runtime", "pyxis"]  # a Slurm image needs its runtime named
    return []
