"""`ddp-doctor check`: static facts and checks, then (unless --static) the live torchrun chain.

Dispatch only; the work lives in env/ (static), live/ (the chain, one or many nodes) and
image/container.py (the whole check run inside an image).
"""

from __future__ import annotations

import argparse
from dataclasses import fields

from ddp_doctor import progress
from ddp_doctor.checkconfig import CheckConfig
from ddp_doctor.commands.options import (
    MAX_RANKS,
    PORT,
    Number,
    add_output_arguments,
    add_oversubscribe_argument,
    count,
    seconds,
)
from ddp_doctor.env import facts, target
from ddp_doctor.env.target import Target
from ddp_doctor.errors import UsageError
from ddp_doctor.image.container import check_in_image
from ddp_doctor.live import hostcheck
from ddp_doctor.live.chain import run_check
from ddp_doctor.report import Report

DEFAULT = CheckConfig()
"""The one source of the flags' defaults (the parser shows and fills in CheckConfig's)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:  # long: the flags written out, one table
    parser.add_argument("--static", action="store_true", help="only the checks that need no ranks (about a second)")
    add_target_arguments(parser)
    parser.add_argument(
        "--expect-gpus",
        type=count("GPUs", 0, 1024),
        metavar="N",
        help="GPUs this node must show to torch; fewer is a failure (default: judged from NVML, /dev/nvidia*, NVIDIA_VISIBLE_DEVICES)",
    )
    live = parser.add_argument_group("live chain")
    live.add_argument(
        "--nproc",
        type=count("ranks", 1, MAX_RANKS),
        metavar="N",
        help="ranks per node, at most one per GPU with NCCL and one per CPU core with gloo unless "
        "--oversubscribe (default: visible GPUs with NCCL, else 2 CPU ranks with gloo)",
    )
    add_oversubscribe_argument(live)
    live.add_argument(
        "--backend", choices=["nccl", "gloo"], help="process-group backend (default: nccl with GPUs, else gloo)"
    )
    live.add_argument(
        "--timeout",
        type=seconds(),
        default=DEFAULT.timeout,
        metavar="S",
        help=f"overall deadline in seconds (default: {DEFAULT.timeout:g})",
    )
    live.add_argument(
        "--master-port", type=PORT, metavar="PORT", help="rendezvous port for --standalone (default: a free port)"
    )
    live.add_argument(
        "--dataloader-workers",
        type=count("worker processes", 0, 256),
        default=DEFAULT.dataloader_workers,
        metavar="N",
        help=f"DataLoader worker processes (default: {DEFAULT.dataloader_workers})",
    )
    live.add_argument(
        "--batch-mb",
        type=Number("MB", 0, 16384, above=True),
        default=DEFAULT.batch_mb,
        metavar="MB",
        help=f"size of one DataLoader batch in MB (default: {DEFAULT.batch_mb:g})",
    )
    live.add_argument("--gpu-health", action="store_true", help="also run the quick GPU health micro-benchmarks")
    live.add_argument(
        "--keep-run-dir", action="store_true", help="keep the run directory with per-rank logs (path printed)"
    )
    multi = parser.add_argument_group("several nodes (torchrun c10d rendezvous)")
    multi.add_argument("--nnodes", metavar="N|MIN:MAX", help="number of nodes (default: 1, --standalone)")
    multi.add_argument(
        "--node-rank",
        type=count("a node rank", 0, 65535),
        metavar="R",
        help="this node's rank (0 = the node that writes the cluster report)",
    )
    multi.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="c10d rendezvous endpoint, usually node 0")
    multi.add_argument("--rdzv-id", metavar="ID", help="rendezvous id shared by every node of one run")
    multi.add_argument(
        "--join-timeout",
        type=seconds(),
        metavar="S",
        help="how long to wait for every node to join (default: a third of --timeout)",
    )
    image = parser.add_argument_group("inside a container image")
    image.add_argument("--image", metavar="REF", help="run the whole check inside this image")
    image.add_argument(
        "--engine", choices=["docker", "podman"], help="container engine (default: podman if found, else docker)"
    )
    image.add_argument(
        "engine_flags",
        nargs=argparse.REMAINDER,
        metavar="-- ENGINE_FLAGS",
        help="flags for the engine's run command, after '--' (default: the recommended --gpus/--shm-size/--ipc/--ulimit)",
    )
    add_output_arguments(parser)


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the Python interpreter whose environment is examined (also $DDP_DOCTOR_PYTHON; default: the one "
        "the torchrun on PATH runs, else a python3/python on PATH with torch, else ddp-doctor's own)",
    )


def inputs(args: argparse.Namespace) -> list[str]:
    """The interpreter named by --python (or $DDP_DOCTOR_PYTHON): --output must not replace it."""
    return target.named_interpreters(getattr(args, "python", None))


def resolve_target(args: argparse.Namespace, report: Report) -> Target:
    """The target interpreter, named in the report's header with the reason it was chosen."""
    chosen = target.resolve(getattr(args, "python", None))
    report.target["python"] = f"{chosen.python} ({chosen.reason})"
    return chosen


def config_from_args(args: argparse.Namespace) -> CheckConfig:
    """The one place check's flags become its frozen config (each field is the flag's argparse dest);
    the output flags (--format, --output, ...) and --python stay with the command."""
    given = vars(args)
    flags = list(given["engine_flags"] or [])
    values = {f.name: given[f.name] for f in fields(CheckConfig) if f.name != "engine_flags"}
    try:
        return CheckConfig(**values, engine_flags=tuple(flags[1:] if flags[:1] == ["--"] else flags))
    except ValueError as exc:  # the config refuses itself (CheckConfig.__post_init__): one line, exit 2
        raise UsageError(str(exc)) from None


def run(args: argparse.Namespace) -> Report:
    config = config_from_args(args)
    if config.image:
        found = check_in_image(config)
        report = Report(command="check", target=found.target)
        return hostcheck.assemble(report, found.facts, found.results, found.root_cause)
    report = Report.for_host("check")
    chosen = resolve_target(args, report)
    if config.static or chosen.source == "none":  # with no training environment there is nothing to launch
        recorded = hostcheck.host_facts(facts.gather(target=chosen), config)
        headline = (
            f"Distributed training was not checked: {target.NOT_FOUND}. Nothing was launched; "
            "the checks of this host (shared memory, limits, network, GPUs) ran."
        )
        return hostcheck.assemble(
            report, recorded, hostcheck.judge(recorded), headline=headline if chosen.source == "none" else None
        )

    beats = progress.Latest()
    shown = progress.Display("check", lambda: progress.rank_lines(beats.get(), "starting torchrun"))
    with progress.live(shown, progress.wanted(args.format, args.quiet, args.output)):
        return run_check(config, report, chosen, on_poll=beats.set)
