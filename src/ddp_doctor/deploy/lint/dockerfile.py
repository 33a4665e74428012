"""Dockerfiles -> one Unit per build stage (its FROM image; USER for the final stage)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ddp_doctor.deploy.lint.datasets import copies_data, downloads_data
from ddp_doctor.deploy.lint.model import At, Structural, Unit, ids_out_of_range

_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)\s+(.*)$", re.DOTALL)
_HEREDOC = re.compile(r"<<-?[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?")
KNOWN = frozenset(
    [
        "FROM",
        "RUN",
        "CMD",
        "LABEL",
        "MAINTAINER",
        "EXPOSE",
        "ENV",
        "ADD",
        "COPY",
        "ENTRYPOINT",
        "VOLUME",
        "USER",
        "WORKDIR",
        "ARG",
        "ONBUILD",
        "STOPSIGNAL",
        "HEALTHCHECK",
        "SHELL",
    ]
)
"""The instructions docker build knows (https://docs.docker.com/reference/dockerfile/); any other word
that starts an instruction stops the build with 'unknown instruction'."""


def instructions(text: str) -> list[tuple[str, str, int]]:
    """(INSTRUCTION, arguments, first line) with backslash continuations joined, comments and the
    bodies of heredocs (RUN <<EOF ... EOF) skipped."""
    out: list[tuple[str, str, int]] = []
    buf, start = "", 0
    heredoc: str | None = None
    for n, raw in enumerate(text.split("\n"), start=1):
        if heredoc is not None:
            if raw.strip() == heredoc:  # leniently: <<-EOF strips leading tabs, <<EOF does not
                heredoc = None
            continue
        if not buf and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if buf and raw.lstrip().startswith("#"):
            continue  # comment lines inside a continuation are dropped by the builder too
        if not buf:
            start = n
        stripped = raw.rstrip()
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += raw
        m = _INSTRUCTION.match(buf)
        if m:
            out.append((m.group(1).upper(), m.group(2).strip(), start))
            here = _HEREDOC.search(m.group(2))
            if here and m.group(1).upper() in ("RUN", "COPY", "ADD"):
                heredoc = here.group(1)
        else:
            out.append((buf.strip().upper(), "", start))
        buf = ""
    if buf:
        m = _INSTRUCTION.match(buf)
        if m:
            out.append((m.group(1).upper(), m.group(2).strip(), start))
    return out


def env_pairs(args: str, line: int) -> dict[str, At[str]]:
    """`ENV A=1 B="two words"` or the legacy `ENV A one value`."""
    try:
        words = shlex.split(args)
    except ValueError:
        words = args.split()
    if words and "=" not in words[0]:
        return {words[0]: At(" ".join(words[1:]), line)}
    return {k: At(v, line) for k, eq, v in (w.partition("=") for w in words) if eq}


def _data_into_image(instr: str, args: str, source: str) -> str | None:
    if instr == "RUN":
        fetched = downloads_data(args)
        return f"RUN downloads {fetched}" if fetched is not None else None
    words = [w for w in args.split() if not w.startswith("--")]
    if "--from=" in args or len(words) < 2:
        return None  # from another stage or image: judged where it was made
    path = Path(source)
    context = path.resolve().parent if path.is_file() else None
    copied = copies_data([w.strip("'\"[],") for w in words[:-1]], context)
    return f"{instr} {copied}" if copied is not None else None


def units(text: str, source: str) -> list[Unit]:
    stages: list[Unit] = []
    names: set[str] = set()
    user: At[str] | None = None
    env: dict[str, At[str]] = {}
    env_of: dict[str, dict[str, At[str]]] = {}
    """ENV of each named stage: a stage built FROM it starts with it."""
    unknown: list[tuple[str, int]] = []
    for instr, args, line in instructions(text):
        if instr not in KNOWN:
            unknown.append((instr, line))
        if instr == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            image = words[0] if words else ""
            u = Unit("dockerfile", source, f"stage {len(stages)} (FROM {image})", line)
            # A stage built FROM an earlier stage, scratch, or an ARG is not a registry image to pin.
            if image.lower() not in names and image != "scratch" and "$" not in image:
                u.image = At(image, line)
            env = dict(env_of.get(image.lower(), {}))
            if len(words) >= 3 and words[1].lower() == "as":
                names.add(words[2].lower())
                env_of[words[2].lower()] = env
            stages.append(u)
            user = None
        elif instr in ("RUN", "COPY", "ADD") and stages and stages[-1].data_copied is None:
            found = _data_into_image(instr, args, source)
            if found is not None:
                stages[-1].data_copied = At(found, line)
        elif instr == "USER":
            user = At(args.split()[0] if args.split() else "", line)
        elif instr == "ENV" and stages:
            env.update(env_pairs(args, line))
    if stages and unknown:
        _, line = unknown[0]
        word = (text.split("\n")[line - 1].split() or ["?"])[0]
        message = f"unknown instruction {word} (the line does not continue an instruction)"
        stages[-1].structural.append(Structural("syntax_error", line, {"message": message, "reader": "docker build"}))
    if stages:
        final = stages[-1]
        final.env = env  # what every container of the image starts with
        if user is not None and ids_out_of_range(user.value):
            final.structural.append(Structural("invalid_id", user.line, {"field": "USER", "value": user.value}))
        elif user is None:
            final.root = At("no USER", final.line)
        elif user.value.split(":")[0] in ("root", "0"):
            final.root = At(f"USER {user.value}", user.line)
    return stages
