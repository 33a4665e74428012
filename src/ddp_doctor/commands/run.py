"""`ddp-doctor run [options] -- COMMAND...`: run the user's own distributed job and watch it.

The job's stdin/stdout/stderr, argv and exit status are its own. The report goes to stderr (or
--output), never into the job's stdout, and is kept in the run directory as report.json and
report.html. Exit status: the job's own (default) or, with --exit-code verdict, a class an
orchestrator can act on (0 ok, 1 job failed, 10 hang, 11 infrastructure, 130 interrupted).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

from ddp_doctor.commands import Printed
from ddp_doctor.commands.options import Number, add_output_arguments, count, seconds, text_width, use_color
from ddp_doctor.errors import UsageError
from ddp_doctor.jobwatch import gather, slurmenv
from ddp_doctor.jobwatch.config import WatchConfig
from ddp_doctor.jobwatch.results import build_report, exit_class
from ddp_doctor.jobwatch.supervise import watch
from ddp_doctor.knowledge import exitcodes
from ddp_doctor.render import render
from ddp_doctor.render.headline import compose as compose_headline
from ddp_doctor.report import Report, Result, Status


def add_arguments(parser: argparse.ArgumentParser) -> None:  # long: the flags written out, one table

    parser.add_argument(
        "--run-dir", metavar="DIR", help="keep the run's evidence here (default: ./ddp-doctor-runs/<time>-<pid>)"
    )
    parser.add_argument(
        "--hang-after",
        type=seconds(),
        default=None,
        metavar="S",
        help="a fixed threshold: examine the ranks after S s without progress (default: learned from the job's rhythm)",
    )
    parser.add_argument(
        "--hang-floor",
        type=seconds(),
        default=15.0,
        metavar="S",
        help="the learned threshold is max(S, K x p95 of the intervals between collectives) (default 15)",
    )
    parser.add_argument(
        "--hang-k",
        type=Number("a multiple", 1, 1000),
        default=5.0,
        metavar="K",
        help="see --hang-floor (default 5)",
    )
    parser.add_argument(
        "--on-hang",
        choices=("report", "kill"),
        default="report",
        help="after a hang: report and keep waiting, or end the job",
    )
    parser.add_argument(
        "--stacks",
        choices=("auto", "py-spy", "hook", "faulthandler", "off"),
        default="auto",
        help=(
            "how rank stacks are taken (auto: py-spy, else the startup hook's thread, and SIGURG to faulthandler "
            "only for a rank whose thread cannot run; hook: the same without py-spy; faulthandler: an old name of hook)"
        ),
    )
    parser.add_argument(
        "--no-hook",
        action="store_true",
        help="no startup hook in the job's Python processes (no output capture, no faulthandler, no error files from ranks)",
    )
    parser.add_argument(
        "--no-error-files", action="store_true", help="do not set TORCHELASTIC_ERROR_FILE or write error files"
    )
    parser.add_argument("--no-flight-recorder", action="store_true", help="do not turn on the NCCL flight recorder")
    parser.add_argument("--no-nccl-debug", action="store_true", help="do not set NCCL_DEBUG=WARN / NCCL_DEBUG_FILE")
    parser.add_argument("--no-ras", action="store_true", help="do not query NCCL's RAS (localhost:28028) on a hang")
    parser.add_argument(
        "--sample-hz",
        type=Number("samples a second", 0, 100),
        default=1.0,
        metavar="HZ",
        help="NVML timeline rate, 0 = off (default 1)",
    )
    parser.add_argument(
        "--stack-sample",
        type=Number("seconds", 0, 3600),
        default=1.0,
        metavar="S",
        help="sample every rank's stack every S s for the straggler verdict, 0 = off (default 1)",
    )
    parser.add_argument("--live", action="store_true", help="a live table of the ranks and GPUs on stderr")
    parser.add_argument(
        "--exit-code",
        choices=("job", "verdict"),
        default="job",
        help="exit with the job's status (default) or the verdict class",
    )
    parser.add_argument(
        "--nnodes",
        type=count("nodes", 1, 65536),
        help="nodes in the job (for --gather; default 1, under srun the step's nodes)",
    )
    parser.add_argument(
        "--node-rank",
        type=count("a node rank", 0, 65535),
        help="this node's rank, 0 gathers the report (default 0, under srun this node's place in the step)",
    )
    parser.add_argument(
        "--gather",
        metavar="HOST:PORT",
        help="node 0 listens here and joins every node's evidence into one report "
        "(under srun, one task per node: the step's first node, port 29600 + job id mod 300)",
    )
    parser.add_argument(
        "--gather-timeout",
        type=seconds(),
        default=60.0,
        metavar="S",
        help="how long node 0 waits for the other nodes after its job ended",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- followed by your launch command")
    add_output_arguments(parser)


def inputs(args: argparse.Namespace) -> list[str]:
    """The files the job's command line names (its script, its config): --output must not replace them."""
    return [word for word in args.command if word != "--" and os.path.isfile(word)]


def config_from_args(args: argparse.Namespace) -> WatchConfig:

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "no command to run: give it after '--', e.g. ddp-doctor run -- torchrun --nproc-per-node 2 train.py"
        )
    _refuse_a_missing_script(command)
    nnodes, node_rank, gather = _placement(args)
    if nnodes < 1 or not 0 <= node_rank < nnodes:
        raise UsageError(f"--node-rank {node_rank} is not in 0..{nnodes - 1} (--nnodes {nnodes})")
    if gather and (":" not in gather or not gather.rpartition(":")[2].isdigit()):
        raise UsageError(f"--gather wants HOST:PORT, got {gather!r}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = Path(args.run_dir) if args.run_dir else Path("ddp-doctor-runs") / f"{stamp}-{os.getpid()}"
    _make_run_dir(run_dir, given=bool(args.run_dir))
    return WatchConfig(
        command=tuple(command),
        run_dir=run_dir.resolve(),
        hang_after_s=args.hang_after,
        hang_floor_s=args.hang_floor,
        hang_k=args.hang_k,
        on_hang=args.on_hang,
        stacks="hook" if args.stacks == "faulthandler" else args.stacks,
        hook=not args.no_hook,
        error_files=not args.no_error_files,
        flight_recorder=not args.no_flight_recorder,
        nccl_debug=not args.no_nccl_debug,
        ras=not args.no_ras,
        sample_hz=args.sample_hz,
        stack_sample_s=args.stack_sample,
        live=args.live,
        node_rank=node_rank,
        nnodes=nnodes,
        gather=gather,
        gather_timeout_s=args.gather_timeout,
    )


# Launchers that run a Python script from this machine's working directory, by their program name.
# A wrapper (srun, docker, ssh, kubectl) may run the script somewhere else, so only these are judged.
_PYTHON_LAUNCHERS = re.compile(r"^(python[0-9.]*|torchrun|accelerate|deepspeed)$")
_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _script_of(command: list[str]) -> str | None:
    """The .py script a Python launcher at command[0] would open, or None when it cannot be told."""
    if not _PYTHON_LAUNCHERS.match(os.path.basename(command[0])):
        return None
    words = iter(command[1:])
    for word in words:
        if word == "-c":
            return None  # python -c CODE: the words after it are the code's argv
        if word == "-m":
            if next(words, "") not in _TORCHRUN_MODULES:
                return None  # a module of its own, whose arguments are its business
            continue
        if word.endswith(".py") and not word.startswith("-"):
            return word
    return None


def _refuse_a_missing_script(command: list[str]) -> None:
    """A typo in the script's name is the user's to fix before any rank starts: every rank would fail
    with Python's "can't open file" and torchrun's summary would say only that the launcher exited 1."""
    script = _script_of(command)
    if script is None or os.path.exists(script):
        return
    raise UsageError(
        f"the script {os.path.abspath(script)} does not exist; {os.path.basename(command[0])} would fail "
        "at once with \"can't open file\": check the script's name and the working directory"
    )


def _placement(args: argparse.Namespace) -> tuple[int, int, str | None]:
    """(nnodes, node rank, gather endpoint): the flags, else Slurm's variables under srun, else one node.

    A flag always wins; Slurm fills only what was not given, and only for one task per node of a
    multi-node step (slurmenv.SlurmPlacement.gathers)."""

    slurm = slurmenv.placement(os.environ)
    auto = slurm is not None and slurm.gathers
    nnodes = args.nnodes if args.nnodes is not None else (slurm.nnodes if auto and slurm else 1)
    node_rank = args.node_rank if args.node_rank is not None else (slurm.node_rank if auto and slurm else 0)
    gather = args.gather if args.gather is not None else (slurm.gather if auto and slurm else None)
    return nnodes, node_rank, gather


def _make_run_dir(run_dir: Path, given: bool) -> None:
    """Made before the job starts: a run directory that cannot be made is the user's to fix, at once."""
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"--run-dir {run_dir} exists and is not a directory; give a new or existing directory")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(run_dir, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if given:
            raise UsageError(
                f"cannot make --run-dir {run_dir}: {reason}; give a directory where you can write"
            ) from None
        raise UsageError(
            f"cannot make the run directory {run_dir} in the working directory: {reason}; "
            "pass --run-dir DIR where you can write"
        ) from None


def run(args: argparse.Namespace) -> Printed:

    cfg = config_from_args(args)
    started = time.monotonic()
    server, bind_problem = None, None
    if cfg.gather and cfg.nnodes > 1 and cfg.node_rank == 0:
        try:
            server = gather.Server.start(cfg)
        except OSError as exc:  # the port is taken (another job's doctor on this node): this node's report only
            bind_problem = f"could not listen on {cfg.gather}: {exc.strerror or exc}"
    try:
        outcome = watch(cfg)
        report = build_report(outcome)
        if bind_problem:
            report.add(Result("run.gather", "Every node's evidence", Status.WARN, bind_problem + "; this node only"))
        elif cfg.gather and cfg.nnodes > 1:
            if server is not None:
                gather.join(report, server.wait(cfg.nnodes - 1, cfg.gather_timeout_s), cfg.nnodes)
                # The class follows the whole job now: another node's first failing rank or hang decides.
                report.facts["run"]["exit_class"] = exit_class(report, outcome)
            else:
                gather.send(cfg, report)
    finally:
        if server is not None:
            server.close()
    slurm = slurmenv.placement(os.environ)
    if slurm is not None:
        report.facts["slurm"] = slurm.facts()
    _failed_node(report)
    report.finish(started)
    report.headline = report.headline or compose_headline(report)
    (cfg.run_dir / "report.json").write_text(json.dumps(report.to_dict(), indent=1, default=str), encoding="utf-8")
    (cfg.run_dir / "report.html").write_text(render(report, "html"), encoding="utf-8")
    to_stderr = args.output in (None, "-")
    color = to_stderr and use_color(None) and sys.stderr.isatty()
    text = render(report, args.format, color=color, verbose=args.verbose, width=text_width(args.output, sys.stderr))
    if args.output in (None, "-"):
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.write(f"ddp-doctor: evidence and report in {cfg.run_dir}\n")
        sys.stderr.flush()
        text = ""
    if args.exit_code == "verdict":
        code = exitcodes.code(str(report.facts["run"]["exit_class"]))
    else:
        code = outcome.returncode if outcome.returncode is not None else 1
        code = code if code >= 0 else 128 - code  # a launcher killed by a signal: the shell's convention
    return Printed(text=text, exit_code=code)


def _failed_node(report: Report) -> None:
    """facts.run.failed_node: the node of the root cause (this host on one node), for a requeue script
    that excludes it (docs/run.md); absent when nothing failed."""
    run = report.facts.get("run")
    if not isinstance(run, dict) or run.get("exit_class") in (None, "ok", "interrupted"):
        return
    root = next((r for r in report.results if r.id == report.root_cause and r.node), None)
    run["failed_node"] = root.node if root is not None else str(report.target.get("host") or "")
