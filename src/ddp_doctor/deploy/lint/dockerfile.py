"""Dockerfiles -> one Unit per build stage (its FROM image; USER for the final stage)."""

from __future__ import annotations

import re

from ddp_doctor.deploy.lint.model import At, Unit

_INSTRUCTION = re.compile(r"^\s*([A-Za-z]+)\s+(.*)$", re.DOTALL)


def instructions(text: str) -> list[tuple[str, str, int]]:
    """(INSTRUCTION, arguments, first line) with backslash continuations joined and comments skipped."""
    out: list[tuple[str, str, int]] = []
    buf, start = "", 0
    for n, raw in enumerate(text.split("\n"), start=1):
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
        buf = ""
    if buf:
        m = _INSTRUCTION.match(buf)
        if m:
            out.append((m.group(1).upper(), m.group(2).strip(), start))
    return out


def units(text: str, source: str) -> list[Unit]:
    stages: list[Unit] = []
    names: set[str] = set()
    user: At[str] | None = None
    for instr, args, line in instructions(text):
        if instr == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            image = words[0] if words else ""
            if len(words) >= 3 and words[1].lower() == "as":
                names.add(words[2].lower())
            u = Unit("dockerfile", source, f"stage {len(stages)} (FROM {image})", line)
            # A stage built FROM an earlier stage, scratch, or an ARG is not a registry image to pin.
            if image.lower() not in names and image != "scratch" and "$" not in image:
                u.image = At(image, line)
            stages.append(u)
            user = None
        elif instr == "USER":
            user = At(args.split()[0] if args.split() else "", line)
    if stages:
        final = stages[-1]
        if user is None:
            final.root = At("no USER", final.line)
        elif user.value.split(":")[0] in ("root", "0"):
            final.root = At(f"USER {user.value}", user.line)
    return stages
