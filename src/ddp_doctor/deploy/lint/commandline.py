"""Reading launcher command lines: torchrun / ddp-doctor flags, and `docker|podman run` options."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ddp_doctor.deploy.lint.model import At, Launch
from ddp_doctor.deploy.lint.shellparse import Word, commands

TORCHRUN_FLAGS = {
    "--nproc-per-node": "nproc",
    "--nproc_per_node": "nproc",
    "--nnodes": "nnodes",
    "--rdzv-endpoint": "rdzv_endpoint",
    "--rdzv_endpoint": "rdzv_endpoint",
    "--master-addr": "master_addr",
    "--master_addr": "master_addr",
}
DOCTOR_FLAGS = {"--nproc": "nproc", "--nnodes": "nnodes", "--rdzv-endpoint": "rdzv_endpoint", "--backend": "backend"}
SHELLS = {"sh", "bash", "dash", "zsh", "/bin/sh", "/bin/bash", "/usr/bin/env"}
SCRIPT_DEPTH = 3


def _flag_values(words: list[Word], table: dict[str, str]) -> dict[str, At[str]]:
    found: dict[str, At[str]] = {}
    for i, w in enumerate(words):
        name, eq, value = w.text.partition("=")
        if name in table:
            if eq:
                found[table[name]] = At(value, w.line)
            elif i + 1 < len(words):
                found[table[name]] = At(words[i + 1].text, words[i + 1].line)
    return found


def _is_torchrun(words: list[Word], i: int) -> bool:
    base = os.path.basename(words[i].text)
    if base == "torchrun":
        return True
    if base.startswith("python") and i + 2 < len(words) and words[i + 1].text == "-m":
        return words[i + 2].text in ("torch.distributed.run", "torch.distributed.launch")
    return False


def _with(launch: Launch, values: dict[str, At[str]]) -> Launch:
    for attr, value in values.items():
        setattr(launch, attr, value)
    return launch


def launches(words: list[Word], depth: int = 0) -> list[Launch]:
    """Every torchrun / ddp-doctor check started by these words, looking inside `sh -c '...'`."""
    found: list[Launch] = []
    for i, w in enumerate(words):
        if _is_torchrun(words, i):
            rest = words[i + 1 :]
            values = _flag_values(rest, TORCHRUN_FLAGS)
            standalone = any(x.text == "--standalone" for x in rest)
            srun = any(os.path.basename(x.text) == "srun" for x in words[:i])
            launch = Launch("torchrun", w.line, standalone=standalone, under_srun=srun)
            found.append(_with(launch, values))
            break
        if os.path.basename(w.text) == "ddp-doctor" and i + 1 < len(words) and words[i + 1].text == "check":
            values = _flag_values(words[i + 2 :], DOCTOR_FLAGS)
            srun = any(os.path.basename(x.text) == "srun" for x in words[:i])
            found.append(_with(Launch("ddp-doctor", w.line, under_srun=srun), values))
            break
        if (
            w.text == "-c"
            and i > 0
            and os.path.basename(words[i - 1].text) in {os.path.basename(s) for s in SHELLS}
            and i + 1 < len(words)
            and depth < SCRIPT_DEPTH
        ):
            script = words[i + 1]
            for cmd in commands(script.text, first_line=script.line):
                inner = launches(cmd.words, depth + 1)
                srun = any(os.path.basename(x.text) == "srun" for x in words[:i])
                for launch in inner:
                    launch.under_srun = launch.under_srun or srun
                found.extend(inner)
            break
    return found


def nnodes_max(launch: Launch) -> int | None:
    if launch.nnodes is None:
        return None
    last = launch.nnodes.value.split(":")[-1]
    return int(last) if last.isdigit() else None


# --- docker / podman run -------------------------------------------------------------

ENGINES = {"docker", "podman", "nvidia-docker"}
BOOL_LONG = {
    "--rm",
    "--detach",
    "--interactive",
    "--tty",
    "--privileged",
    "--init",
    "--read-only",
    "--publish-all",
    "--no-healthcheck",
    "--oom-kill-disable",
    "--disable-content-trust",
    "--quiet",
    "--help",
    "--replace",
    "--rmi",
    "--no-hosts",
    "--env-host",
    "--read-only-tmpfs",
    "--sig-proxy",
    "--use-api-socket",
}
BOOL_SHORT = set("itdPq")


@dataclass
class RunCommand:
    engine: str
    line: int
    options: list[tuple[str, At[str]]] = field(default_factory=list)
    """(option name, value) in order; booleans have the value 'true'."""
    image: At[str] | None = None
    command: list[Word] = field(default_factory=list)

    def values(self, *names: str) -> list[At[str]]:
        return [v for n, v in self.options if n in names]

    def has(self, *names: str) -> At[str] | None:
        found = self.values(*names)
        return found[-1] if found else None


def run_command(words: list[Word]) -> RunCommand | None:
    """`docker run ...` / `podman run ...` / `docker container run ...` -> its options, image, command."""
    if not words or os.path.basename(words[0].text) not in ENGINES:
        return None
    i = 1
    if i < len(words) and words[i].text == "container":
        i += 1
    if i >= len(words) or words[i].text != "run":
        return None
    run = RunCommand(os.path.basename(words[0].text), words[0].line)
    i += 1
    while i < len(words):
        text = words[i].text
        if text == "--":
            i += 1
            break
        if not text.startswith("-") or text == "-":
            break
        if text.startswith("--"):
            name, eq, value = text.partition("=")
            if eq:
                run.options.append((name, At(value, words[i].line)))
            elif name in BOOL_LONG:
                run.options.append((name, At("true", words[i].line)))
            elif i + 1 < len(words):
                run.options.append((name, At(words[i + 1].text, words[i + 1].line)))
                i += 1
        else:
            flags = text[1:]
            if all(c in BOOL_SHORT for c in flags):
                for c in flags:
                    run.options.append((f"-{c}", At("true", words[i].line)))
            elif len(flags) > 1 and flags[0] not in BOOL_SHORT:  # -v/data:/data style
                run.options.append((f"-{flags[0]}", At(flags[1:], words[i].line)))
            elif i + 1 < len(words):
                run.options.append((f"-{flags[-1]}", At(words[i + 1].text, words[i + 1].line)))
                for c in flags[:-1]:
                    run.options.append((f"-{c}", At("true", words[i].line)))
                i += 1
        i += 1
    if i < len(words):
        run.image = At(words[i].text, words[i].line)
        run.command = words[i + 1 :]
    return run
