"""`ddp-doctor launch`: one launch spec -> a docker / compose / Kubernetes Job / PyTorchJob / Slurm config."""

from __future__ import annotations

import argparse
from typing import Any

from ddp_doctor.commands import Printed
from ddp_doctor.deploy import spec as specs
from ddp_doctor.deploy.targets import TARGETS, render
from ddp_doctor.errors import UsageError

HELP = "generate a docker, compose, Kubernetes Job, PyTorchJob or Slurm config that runs DDP right"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", required=True, choices=TARGETS, help="what to generate")
    parser.add_argument("--image", metavar="REF", help="container image (required here or in --spec)")
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
    parser.add_argument("--output", "-o", metavar="FILE", help="write the config to FILE instead of stdout")


def inputs(args: argparse.Namespace) -> list[str]:
    return [args.spec] if args.spec else []


def spec_from_args(args: argparse.Namespace) -> specs.LaunchSpec:
    values: dict[str, Any] = specs.load_file(args.spec) if args.spec else {}
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
    }
    for attr, key in simple.items():
        if getattr(args, attr, None) is not None:
            values[key] = getattr(args, attr)
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
    extra = list(args.script_args or [])
    extra = extra[1:] if extra[:1] == ["--"] else extra
    if extra:
        if not values.get("script"):
            raise UsageError(f"unexpected arguments {' '.join(extra)!r}: arguments after '--' are for --script")
        values["script_args"] = tuple(extra)
    return specs.build(values)


def _check_target(spec: specs.LaunchSpec, target: str) -> None:
    kubernetes = target in ("k8s", "pytorchjob")
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
