"""Argument parsing, the one error handler, exit codes. No logic lives here.

Each command is a line of COMMANDS (its help) and a module under `ddp_doctor.commands` with:
    add_arguments(parser) -> None     its own flags
    run(args) -> Report | Printed     the work; cli renders and picks the exit code
    inputs(args) -> list[str]         (optional) the files it reads: --output may not overwrite them

Before any work: the standard descriptors exist, output that the terminal cannot encode degrades
instead of failing, SIGTERM unwinds like Ctrl-C, and --output is checked (output.refuse_before_work).
"""

from __future__ import annotations

import argparse
import codecs
import importlib
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Collection, Sequence
from types import ModuleType

from ddp_doctor import __version__, proc
from ddp_doctor.commands import Printed
from ddp_doctor.commands.options import text_width, use_color
from ddp_doctor.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, DoctorError
from ddp_doctor.output import refuse_before_work, write_text
from ddp_doctor.render import render
from ddp_doctor.render.headline import compose as compose_headline
from ddp_doctor.report import Report

# The commands and their one line of `ddp-doctor --help`; a command's module is imported only when it runs
# (or its own --help is asked for): explain's compiled signatures, launch's translators and the rest cost
# about 70 ms of CPU before `check` could start torchrun.
COMMANDS = {
    "check": "check that this environment (or an image) really runs distributed PyTorch training",
    "bench": "measure collective bandwidth (nccl-tests' algbw/busbw) and GPU health; gate CI on a baseline",
    "explain": "explain why a distributed training job failed, from its logs (FILEs, DIRs, or '-' for stdin)",
    "image": "audit a container image (docker save / OCI layout or archive / rootfs) for distributed training, without running it",
    "launch": "generate a docker, compose, Kubernetes Job, PyTorchJob, JobSet, TrainJob or Slurm config that runs DDP right",
    "lint": "lint Kubernetes / compose / Dockerfile / shell / Slurm configs for distributed-training pitfalls",
    "render": "re-render a saved JSON report in another format",
    "run": "run your own distributed job (torchrun, python, accelerate, deepspeed) and say which rank failed or hung, where and why",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line naming the problem, plus where to look; exit 2 like argparse.
        self.exit(EXIT_USAGE, f"ddp-doctor: error: {message} (see '{self.prog} --help')\n")


def _load(name: str) -> ModuleType:
    return importlib.import_module(f"ddp_doctor.commands.{name}")


def build_parser(load: Collection[str] = tuple(COMMANDS)) -> argparse.ArgumentParser:
    """The parser with the flags of the commands in `load` (main: the one on this command line, or none
    for `ddp-doctor --help`); the others are named with their help line, their modules not imported."""
    parser = _Parser(
        prog="ddp-doctor",
        description="Does this PyTorch + CUDA environment really run distributed training? If not, why, and what to change.",
    )
    parser.add_argument("--version", action="version", version=f"ddp-doctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, line in COMMANDS.items():
        p = sub.add_parser(name, help=line, description=line)
        if name not in load:
            continue  # never parses in this run; named so a typo still lists every command
        module = _load(name)
        module.add_arguments(p)
        p.set_defaults(_module=module)
    return parser


def _crash_log(exc: BaseException) -> str:
    fd, path = tempfile.mkstemp(prefix="ddp-doctor-crash-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"ddp-doctor {__version__}, argv={sys.argv!r}\n")
        f.write("".join(traceback.format_exception(exc)))
    return path


# Characters the reports use, and what they become on a terminal that cannot show them
# (PYTHONIOENCODING=ascii, LANG=C on an old Python): the report still reads, nothing fails.
_PLAIN = {
    "—": "-",
    "–": "-",
    "…": "...",
    "→": "->",
    "←": "<-",
    "×": "x",
    "≥": ">=",
    "≤": "<=",
    "✔": "ok",
    "✘": "x",
    "✗": "x",
    "•": "*",
    "·": ".",
    "‘": "'",
    "’": "'",
    "“": '"',
    "”": '"',
    "µ": "u",
    "±": "+/-",
}


def _plain(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    bad = exc.object[exc.start : exc.end]
    return "".join(_PLAIN.get(c, "?") for c in bad), exc.end


codecs.register_error("ddp-doctor-plain", _plain)


def _prepare_streams() -> None:
    """fds 0-2 closed by the caller (`>&-`) are opened on /dev/null, so no file we open lands on
    them (sys.stdout stays None: refuse_before_work says so); output the encoding cannot hold degrades."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="ddp-doctor-plain")


def _say(line: str) -> None:
    if sys.stderr is not None:
        print(line, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    _prepare_streams()
    given = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(given[:1] if given and given[0] in COMMANDS else ())
    args = parser.parse_args(given)
    started = time.monotonic()
    previous = signal.signal(signal.SIGTERM, proc.on_terminate)
    try:
        module: ModuleType = args._module
        output = getattr(args, "output", None)
        refuse_before_work(output, module.inputs(args) if hasattr(module, "inputs") else ())
        outcome: Report | Printed = module.run(args)
        if isinstance(outcome, Printed):
            if outcome.text:  # `run` has already written its report to stderr: stdout is the job's
                write_text(outcome.text, output)
            return outcome.exit_code
        report = outcome.finish(started)
        report.headline = report.headline or compose_headline(report)
        fmt = getattr(args, "format", "text")
        verbose = bool(getattr(args, "verbose", False))
        write_text(render(report, fmt, color=use_color(output), verbose=verbose, width=text_width(output)), output)
        return report.exit_code(strict=bool(getattr(args, "strict", False)))
    except DoctorError as exc:
        _say(f"ddp-doctor: error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        signum = proc.terminated_by
        _say("ddp-doctor: terminated" if signum else "ddp-doctor: interrupted")
        return 128 + signum if signum else EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_INTERNAL
    except Exception as exc:  # noqa: BLE001 - the tool's own bug: one line, details in a log
        path = _crash_log(exc)
        _say(f"ddp-doctor: internal error: {type(exc).__name__}: {exc} (full log: {path})")
        return EXIT_INTERNAL
    finally:
        proc.end_children()
        signal.signal(signal.SIGTERM, previous)
