"""`ddp-doctor launch`: one launch spec -> a docker / compose / Kubernetes Job / PyTorchJob / JobSet / TrainJob /
Slurm config."""

from __future__ import annotations

import argparse
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from ddp_doctor.commands import Printed
from ddp_doctor.deploy import spec as specs
from ddp_doctor.deploy import trainjob
from ddp_doctor.deploy.targets import TARGETS, render
from ddp_doctor.errors import UsageError
from ddp_doctor.words import plural


def add_arguments(parser: argparse.ArgumentParser) -> None:  # long: the flags written out, one table
    parser.add_argument("--target", required=True, choices=TARGETS, help="what to generate")
    parser.add_argument(
        "--image",
        metavar="REF",
        help="container image (required here or in --spec; for slurm only with --container-runtime, "
        "else the job runs in the submitting environment)",
    )
    parser.add_argument("--spec", metavar="FILE", help="a YAML launch spec; flags override its values")
    parser.add_argument("--name", help="job / service name, a DNS label (default: ddp-doctor)")
    parser.add_argument("--namespace", help="Kubernetes namespace (default: none, the current context's)")
    shape = parser.add_argument_group("nodes and GPUs")
    shape.add_argument("--nodes", type=int, metavar="N", help="number of nodes (default: 1)")
    shape.add_argument(
        "--min-nodes", type=int, metavar="M", help="elastic: start with M..N nodes (torchrun --nnodes M:N)"
    )
    shape.add_argument(
        "--gpus-per-node",
        type=int,
        metavar="G",
        help=f"GPUs (= ranks) per node (default: {specs.DEFAULT_GPUS}; 0 = 2 CPU ranks)",
    )
    shape.add_argument(
        "--devices", metavar="0,1|all", help="docker/compose: explicit GPU indices, or all of the host's GPUs"
    )
    run = parser.add_argument_group("what runs")
    run.add_argument(
        "--script", metavar="FILE", help="your training script, started through torchrun (default: ddp-doctor check)"
    )
    run.add_argument(
        "script_args", nargs=argparse.REMAINDER, metavar="-- ARGS", help="arguments for --script, after '--'"
    )
    res = parser.add_argument_group("resources, mounts, identity")
    res.add_argument("--shm-size", metavar="SIZE", help="/dev/shm size (default: 4g per GPU)")
    res.add_argument(
        "--ipc-host", action="store_true", default=None, help="docker/compose: --ipc=host instead of a sized /dev/shm"
    )
    res.add_argument("--cpus", type=int, metavar="N", help="CPUs per node (default: 8 per GPU)")
    res.add_argument("--memory", metavar="SIZE", help="memory per node without /dev/shm (default: 16g per GPU)")
    res.add_argument(
        "--data", action="append", metavar="SRC:DEST[:ro]", help="a data mount (SRC a path or pvc:NAME); repeatable"
    )
    res.add_argument(
        "--logs",
        metavar="SRC:DEST",
        help="logs and checkpoints (default: ./logs:/logs, pvc:NAME-logs:/logs on Kubernetes)",
    )
    res.add_argument(
        "--env", action="append", metavar="NAME=VALUE", help="environment, e.g. NCCL_SOCKET_IFNAME=eth0; repeatable"
    )
    res.add_argument("--uid", type=int, help="user id, 1 or more (default: 1000)")
    res.add_argument("--gid", type=int, help="group id, 1 or more (default: 1000)")
    res.add_argument(
        "--allow-root", action="store_true", default=None, help="accept --uid 0 / --gid 0: the job runs as root"
    )
    res.add_argument("--rdzv-port", type=int, metavar="PORT", help=f"rendezvous port (default: {specs.RDZV_PORT})")
    slurm = parser.add_argument_group("slurm")
    slurm.add_argument(
        "--container-runtime",
        choices=specs.CONTAINER_RUNTIMES,
        help="run --image through pyxis/enroot (srun --container-image) or Apptainer/SingularityCE "
        "(srun ... apptainer exec); without --image: no container",
    )
    slurm.add_argument(
        "--env-setup",
        action="append",
        metavar="LINE",
        help="a shell line the batch script runs before its steps, e.g. 'source ~/venv/bin/activate' or "
        "'module load cuda'; repeatable (default without --image: the VIRTUAL_ENV or CONDA_PREFIX active now)",
    )
    slurm.add_argument("--partition", help="sbatch --partition (default: the cluster's default partition)")
    slurm.add_argument(
        "--time", metavar="LIMIT", help="sbatch --time, e.g. 30, 4:00:00, 1-12 (default: the partition's)"
    )
    slurm.add_argument(
        "--ranks-per-task",
        action="store_true",
        default=None,
        help="srun starts one task per rank (RANK from SLURM_PROCID) running --script, instead of one torchrun per node",
    )
    parser.add_argument(
        "--preflight",
        nargs="?",
        const="static",
        choices=specs.PREFLIGHTS,
        help="run ddp-doctor check on every node before the job, at most 60 s: --static (the default) or the "
        "one-node live chain; an srun step in Slurm, an init container on Kubernetes",
    )
    parser.add_argument(
        "--watch",
        action="store_true",
        default=None,
        help="run --script under ddp-doctor run --exit-code verdict; the Kubernetes targets then write the "
        "podFailurePolicy / JobSet failurePolicy for its exit codes",
    )
    parser.add_argument(
        "--runtime",
        metavar="NAME",
        help="trainjob: reference this existing ClusterTrainingRuntime instead of writing one",
    )
    parser.add_argument("--output", "-o", metavar="FILE", help="write the config to FILE instead of stdout")


def inputs(args: argparse.Namespace) -> list[str]:
    return [args.spec] if args.spec else []


def spec_from_args(args: argparse.Namespace) -> specs.LaunchSpec:
    values = specs.load_file(args.spec) if args.spec else specs.SpecFields()
    simple = {
        "image": "image",
        "name": "name",
        "namespace": "namespace",
        "nodes": "nodes",
        "min_nodes": "min_nodes",
        "gpus_per_node": "gpus_per_node",
        "script": "script",
        "ipc_host": "ipc_host",
        "cpus": "cpus",
        "uid": "uid",
        "gid": "gid",
        "allow_root": "allow_root",
        "rdzv_port": "rdzv_port",
        "container_runtime": "container_runtime",
        "partition": "partition",
        "time": "time_limit",
        "ranks_per_task": "ranks_per_task",
        "preflight": "preflight",
        "watch": "watch",
        "runtime": "runtime",
    }
    given = {key: getattr(args, attr) for attr, key in simple.items() if getattr(args, attr, None) is not None}
    values.update(cast(specs.SpecFields, given))  # argparse gives each flag its field's type (type=int, ...)
    if args.devices:
        if args.devices == "all":
            values["all_devices"], values["devices"] = True, ()
        else:
            devices = tuple(d.strip() for d in args.devices.split(","))
            if not all(d.isdigit() for d in devices):
                raise UsageError(f"--devices {args.devices!r}: expected GPU indices like 0,1,2 or 'all'")
            values["devices"] = devices
            if args.gpus_per_node is None:
                values["gpus_per_node"] = len(devices)
    if args.shm_size:
        values["shm_bytes"] = specs.parse_size(args.shm_size, "--shm-size")
    if args.memory:
        values["memory_bytes"] = specs.parse_size(args.memory, "--memory")
    if args.data:
        values["data"] = tuple(
            specs.parse_mount(m, f"data{i}" if i else "data", "--data") for i, m in enumerate(args.data)
        )
    if args.logs:
        values["logs"] = specs.parse_mount(args.logs, "logs", "--logs")
    if args.env:
        values["env"] = specs.parse_env(args.env)
    _environment(args, values)
    extra = list(args.script_args or [])
    extra = extra[1:] if extra[:1] == ["--"] else extra
    if extra:
        if not values.get("script"):
            raise UsageError(f"unexpected arguments {' '.join(extra)!r}: arguments after '--' are for --script")
        values["script_args"] = tuple(extra)
    return specs.build(values)


def _environment(args: argparse.Namespace, values: specs.SpecFields) -> None:
    if args.env_setup:
        values["env_setup"] = tuple(args.env_setup)
    elif args.target == "slurm" and not values.get("image") and not values.get("env_setup"):
        found = submitting_environment(os.environ)
        if found is not None:
            values["env_setup"], values["env_from"] = found.env_setup, found.env_from


@dataclass(frozen=True)
class SubmittingEnv:
    """The Python environment active where `launch --target slurm` runs, as the batch script re-activates it."""

    env_setup: tuple[str, ...]
    """The lines that activate it."""
    env_from: str
    """The variable that named it: VIRTUAL_ENV or CONDA_PREFIX."""


def submitting_environment(environ: Mapping[str, str]) -> SubmittingEnv | None:
    """The venv or conda environment active now, as the lines that activate it in the batch script.

    sbatch passes the submitting shell's environment on by default (--export=ALL), but a script
    submitted later, from another shell or with --export=NONE, would lose it: so it is written down."""
    venv, conda = environ.get("VIRTUAL_ENV"), environ.get("CONDA_PREFIX")
    if venv:
        activate = os.path.join(venv, "bin", "activate")
        line = f"source {shlex.quote(activate)}" if os.path.isfile(activate) else _path_line(venv)
        return SubmittingEnv((line,), "VIRTUAL_ENV")
    if conda:
        exe = environ.get("CONDA_EXE")
        lines = (
            (f'eval "$({shlex.quote(exe)} shell.bash hook)"', f"conda activate {shlex.quote(conda)}")
            if exe
            else (_path_line(conda),)
        )
        return SubmittingEnv(lines, "CONDA_PREFIX")
    return None


def _path_line(prefix: str) -> str:
    return f'export PATH={shlex.quote(os.path.join(prefix, "bin"))}:"$PATH"'


# Flags that only a Slurm batch script has a place for.
_SLURM_ONLY = (
    ("container_runtime", "--container-runtime"),
    ("env_setup", "--env-setup"),
    ("partition", "--partition"),
    ("time_limit", "--time"),
    ("ranks_per_task", "--ranks-per-task"),
)
KUBERNETES = ("k8s", "pytorchjob", "jobset", "trainjob")


def _check_slurm(spec: specs.LaunchSpec, target: str) -> None:
    if target != "slurm":
        if not spec.image:
            raise UsageError(f"--image is required for --target {target} (in flags or the spec file)")
        given = [flag for attr, flag in _SLURM_ONLY if getattr(spec, attr)]
        if given:
            raise UsageError(f"{', '.join(given)}: for --target slurm only")
        return
    runtime = spec.container_runtime
    if spec.image and runtime is None:
        raise UsageError(
            "--target slurm --image needs --container-runtime pyxis (srun --container-image, the pyxis "
            "plugin) or apptainer/singularity; without --image the job runs in the submitting environment"
        )
    if runtime and not spec.image:
        raise UsageError(f"--container-runtime {runtime} needs --image (a registry image or an image file)")
    if runtime == "pyxis" and spec.image.endswith(".sif"):
        raise UsageError(f"--image {spec.image}: a SIF file is Apptainer's; pyxis runs enroot squashfs (.sqsh) files")
    if runtime == "pyxis" and "@" in spec.image and not specs.is_image_file(spec.image):
        # enroot's docker:// URI is [USER@][REGISTRY#]IMAGE[:TAG] (NVIDIA/enroot src/docker.sh): no @DIGEST.
        raise UsageError(
            f"--image {spec.image}: enroot (pyxis) takes [REGISTRY#]IMAGE[:TAG], not a digest; give a tag, "
            "or import it once (enroot import -o IMAGE.sqsh docker://...) and pass the .sqsh file"
        )
    if spec.ranks_per_task and spec.script is None:
        raise UsageError(
            "--ranks-per-task needs --script: ddp-doctor check starts its own ranks through torchrun, one per node"
        )
    if spec.ranks_per_task and spec.min_nodes is not None:
        raise UsageError("--ranks-per-task and --min-nodes: an elastic job needs torchrun's rendezvous, one per node")
    if spec.ranks_per_task and spec.cpus is not None and spec.cpus % spec.ranks_per_node:
        raise UsageError(
            f"--cpus {spec.cpus} with --ranks-per-task: expected a multiple of the {plural(spec.ranks_per_node, 'rank')} "
            "per node (each task gets --cpus / ranks)"
        )


def _check_doctor(spec: specs.LaunchSpec, target: str) -> None:
    """--watch and --runtime: where each has a place."""
    if spec.watch and spec.script is None:
        raise UsageError("--watch needs --script: ddp-doctor check reports by itself")
    if spec.watch and target == "pytorchjob":
        raise UsageError(
            "--watch: a PyTorchJob (kubeflow.org/v1) has no podFailurePolicy to act on the verdict's exit codes; "
            "use --target trainjob, jobset or k8s"
        )
    if spec.watch and spec.ranks_per_task:
        raise UsageError("--watch and --ranks-per-task: ddp-doctor run watches one torchrun per node")
    if spec.runtime and target != "trainjob":
        raise UsageError("--runtime: for --target trainjob only (a ClusterTrainingRuntime)")
    if spec.runtime and (spec.preflight or spec.watch):
        raise UsageError(
            f"--runtime {spec.runtime} with --preflight or --watch: the init container and the failure policy live "
            "in the runtime's pod template; leave out --runtime and launch writes a runtime with them"
        )
    reserved = [k for k, _ in spec.env if k in trainjob.RESERVED_ENV]
    if reserved and target == "trainjob":
        raise UsageError(
            f"--env {', '.join(reserved)}: Kubeflow Trainer's torch plugin sets it and refuses a TrainJob that does"
        )
    if spec.min_nodes is not None and target in ("jobset", "trainjob"):
        raise UsageError(
            f"--min-nodes: a {target} runs a fixed number of indexed pods; for an elastic job use --target "
            "pytorchjob (elasticPolicy) or k8s"
        )


def _check_target(spec: specs.LaunchSpec, target: str) -> None:
    _check_slurm(spec, target)
    _check_doctor(spec, target)
    kubernetes = target in KUBERNETES
    for m in (*spec.data, *([spec.logs] if spec.logs else [])):
        if m.claim and not kubernetes:
            raise UsageError(
                f"mount {m.source}:{m.target}: pvc: sources exist only on Kubernetes; "
                f"give a host path for --target {target}"
            )
        if kubernetes and not m.claim and not m.source.startswith("/"):
            raise UsageError(
                f"mount {m.source}:{m.target}: a Kubernetes hostPath must be absolute; give /path or pvc:NAME"
            )
    if (spec.devices or spec.all_devices or spec.ipc_host) and kubernetes:
        raise UsageError(
            "--devices and --ipc-host are for docker/compose; Kubernetes grants GPUs by count "
            "(--gpus-per-node) and sizes /dev/shm (--shm-size)"
        )


def run(args: argparse.Namespace) -> Printed:
    spec = spec_from_args(args)
    _check_target(spec, args.target)
    return Printed(render(spec, args.target))
