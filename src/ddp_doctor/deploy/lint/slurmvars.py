"""Slurm output variables a batch script reads but its own request does not make Slurm set.

sbatch sets SLURM_GPUS only for -G/--gpus, SLURM_GPUS_PER_NODE only for --gpus-per-node and
SLURM_NTASKS_PER_NODE only for --ntasks-per-node (sbatch(1), OUTPUT ENVIRONMENT VARIABLES). A job that
asks --gres=gpu:4 and launches `--nproc_per_node $SLURM_GPUS` hands the launcher an empty count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddp_doctor.deploy.lint.model import Structural


@dataclass(frozen=True)
class SetBy:
    variable: str
    options: tuple[str, ...]
    """The sbatch/salloc options that make Slurm export the variable."""
    certain: bool
    """False where some Slurm releases may fill it from another request (--gres=gpu for GPUS_PER_NODE)."""


SET_BY = (
    SetBy("SLURM_GPUS", ("--gpus", "-G"), True),
    SetBy("SLURM_GPUS_PER_NODE", ("--gpus-per-node",), False),
    SetBy("SLURM_NTASKS_PER_NODE", ("--ntasks-per-node",), True),
)

_OPTION = re.compile(r"(?:^|\s)(--[a-z-]+|-[A-Za-z])(?=[=\s]|\d|$)")
_PRINT = re.compile(r"^\s*(echo|printf)\b")


def _options(text: str) -> set[str]:
    """Options of #SBATCH lines and of any srun/salloc/sbatch line (an option given to the step also sets
    the variable inside that step)."""
    found: set[str] = set()
    for raw in text.split("\n"):
        line = raw.strip()
        if line.startswith("#SBATCH"):
            body = re.sub(r"(^|\s)#.*$", "", line[len("#SBATCH") :])
        elif re.search(r"\b(srun|salloc|sbatch)\b", line) and not line.startswith("#"):
            body = line
        else:
            continue
        for m in _OPTION.finditer(body):
            found.add(m.group(1))
        if re.search(r"(^|\s)-G\s*\d", body):
            found.add("-G")
    return found


def _use(variable: str) -> re.Pattern[str]:
    """A read of the variable: $V, ${V}, ${V...} other than a default, or V inside $(( )) arithmetic."""
    return re.compile(rf"(?<![A-Za-z0-9_])(?<!\bexport )(?<!\$\{{!){variable}(?![A-Za-z0-9_])(?!\s*:?[-=])")


def _assigned(variable: str, code: str) -> bool:
    return (
        re.search(rf"(^|[\s;(])(export\s+|declare\s+(-\w+\s+)*|local\s+)?{variable}=", code, re.MULTILINE) is not None
    )


def unset_reads(text: str, first_line: int = 1) -> list[Structural]:
    """Each variable of SET_BY the script reads while its request lacks every option that sets it."""
    options = _options(text)
    lines = text.split("\n")
    code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
    out: list[Structural] = []
    for var in SET_BY:
        if options & set(var.options) or _assigned(var.variable, code):
            continue
        use = _use(var.variable)
        for n, raw in enumerate(lines, start=first_line):
            if raw.lstrip().startswith("#") or _PRINT.match(raw) or not use.search(raw):
                continue
            context = {"variable": var.variable, "options": " or ".join(var.options)}
            likely = not var.certain and "--gres" in options
            out.append(Structural("slurm_variable_unset", n, context, "warning" if likely else None))
            break
    return out
