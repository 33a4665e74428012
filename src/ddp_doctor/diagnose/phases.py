"""Where in a job an exception was raised: phase and library from its traceback's frames (phases.yaml).

`place(frames, exception)` is the one reading of a traceback that `explain` (a failure no signature knows) and
`run` (the first failing rank) share, so both name the same phase, library and next step.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class TracebackFrame:
    path: str
    line: int
    func: str

    def short(self) -> str:
        """The path from the library's own folder on (site-packages/ and above dropped), with line and function."""
        path = self.path.replace("\\", "/")
        for marker in ("site-packages/", "dist-packages/"):
            if marker in path:
                path = path.rsplit(marker, 1)[1]
                break
        else:  # the user's own file: its folder and name are enough to find it
            path = "/".join(path.split("/")[-2:])
        return f"{path}:{self.line} in {self.func}"


@dataclass(frozen=True)
class _Rule:
    path: re.Pattern[str]
    func: re.Pattern[str] | None
    phase: str | None
    library: str | None
    strong: bool


@dataclass(frozen=True)
class Phase:
    name: str
    words: str
    next: str


@dataclass(frozen=True)
class Placement:
    phase: Phase | None
    library: str | None
    """The library whose frame named the phase (FSDP for a broadcast inside FSDP's constructor), else the
    library of the deepest library frame."""
    raised_in: TracebackFrame | None
    """The deepest (innermost) frame that belongs to a known library: where it was raised."""
    raised_library: str | None
    user_frame: TracebackFrame | None
    """The innermost frame outside every installed package and known library: the user's own code."""
    next_step: str | None
    package: str | None = None
    """The installed package (its folder under site-packages) of the innermost library frame, if installed."""


@dataclass(frozen=True)
class PhaseTable:
    phases: dict[str, Phase]
    rules: tuple[_Rule, ...]
    exceptions: tuple[tuple[re.Pattern[str], str, bool], ...]
    steps: dict[tuple[str, str], str]
    consequences: tuple[re.Pattern[str], ...]
    wrappers: tuple[tuple[re.Pattern[str] | None, re.Pattern[str] | None], ...]
    """(type, message) patterns; either may be None."""

    def is_consequence(self, exception: str) -> bool:
        return any(p.fullmatch(exception) for p in self.consequences)

    def is_wrapper(self, exception: str, message: str) -> bool:
        return any((t is None or t.fullmatch(exception)) and (m is None or m.search(message)) for t, m in self.wrappers)


def _rule(raw: dict[str, Any]) -> _Rule:
    func = raw.get("func")
    return _Rule(
        path=re.compile(str(raw["path"])),
        func=re.compile(f"(?:{func})") if func else None,
        phase=raw.get("phase"),
        library=raw.get("library"),
        strong=bool(raw.get("strong", True)),
    )


@functools.lru_cache(maxsize=1)
def table() -> PhaseTable:
    text = resources.files("ddp_doctor.diagnose").joinpath("phases.yaml").read_text(encoding="utf-8")
    data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    phases = {
        name: Phase(name, str(p["words"]), " ".join(str(p["next"]).split())) for name, p in data["phases"].items()
    }
    rules = tuple(_rule(r) for r in data["frames"])
    for r in rules:
        if r.phase is not None and r.phase not in phases:
            raise ValueError(f"phases.yaml: frame rule {r.path.pattern} names unknown phase {r.phase}")
    exceptions = tuple(
        (re.compile(str(e["type"])), str(e["phase"]), bool(e.get("strong", True))) for e in data["exceptions"]
    )
    steps = {(str(s["phase"]), str(s["library"])): " ".join(str(s["text"]).split()) for s in data["next_steps"]}
    consequences = tuple(re.compile(str(c["type"])) for c in data["consequences"])
    wrappers = tuple(
        (
            re.compile(str(w["type"])) if w.get("type") else None,
            re.compile(str(w["message"])) if w.get("message") else None,
        )
        for w in data["wrappers"]
    )
    return PhaseTable(phases, rules, exceptions, steps, consequences, wrappers)


_INSTALLED = re.compile(r"(?:site|dist)-packages/|/lib/python\d[\d.]*/|^<")
_PACKAGE = re.compile(r"(?:site|dist)-packages/(?P<name>[A-Za-z_][\w\-]*)(?:/|\.py$)")


def is_library(frame: TracebackFrame) -> bool:
    return bool(_INSTALLED.search(frame.path.replace("\\", "/")))


def _match(t: PhaseTable, frame: TracebackFrame) -> _Rule | None:
    path = frame.path.replace("\\", "/")
    for rule in t.rules:
        if rule.path.search(path) and (rule.func is None or rule.func.fullmatch(frame.func)):
            return rule
    return None


def place(frames: tuple[TracebackFrame, ...], exception: str = "") -> Placement:
    """`frames` outermost first, as Python prints them; `exception` the exception's type name."""
    t = table()
    strong: tuple[str, str | None] | None = None
    weak: tuple[str, str | None] | None = None
    deepest: tuple[str, TracebackFrame] | None = None
    inner_first = list(reversed(frames))
    for i, frame in enumerate(inner_first):
        rule = _match(t, frame)
        outer = inner_first[i + 1] if i + 1 < len(inner_first) else None
        if rule is not None and rule.library and deepest is None:
            deepest = (rule.library, frame)
        if strong is not None:
            continue
        # Module-level code run by another module's import: the job is still starting up.
        if frame.func == "<module>" and outer is not None and outer.func == "<module>":
            strong = ("startup", rule.library if rule else None)
            continue
        if rule is None or rule.phase is None:
            continue
        if rule.strong:
            strong = (rule.phase, rule.library)
        elif weak is None:
            weak = (rule.phase, rule.library)
    chosen = strong
    if chosen is None:
        for pattern, by_type, is_strong in t.exceptions:
            if pattern.fullmatch(exception) and (is_strong or weak is None):
                chosen = (by_type, None)
                break
    chosen = chosen or weak
    phase = t.phases.get(chosen[0]) if chosen else None
    installed = next((f for f in inner_first if is_library(f) and not f.path.startswith("<")), None)
    package_match = _PACKAGE.search(installed.path.replace("\\", "/")) if installed is not None else None
    package = package_match.group("name") if package_match else None
    if deepest is None and installed is not None and package is not None:
        deepest = (package, installed)  # a package no rule knows is still named, by its folder
    library = (chosen[1] if chosen else None) or (deepest[0] if deepest else None)
    # A known library's frame is never the user's, installed or run from a source checkout.
    user = next((f for f in inner_first if not is_library(f) and _match_library(t, f) is None), None)
    step = t.steps.get((phase.name, library or ""), phase.next) if phase is not None else None
    return Placement(
        phase=phase,
        library=library,
        raised_in=deepest[1] if deepest else None,
        raised_library=deepest[0] if deepest else None,
        user_frame=user,
        next_step=step,
        package=package,
    )


def _match_library(t: PhaseTable, frame: TracebackFrame) -> str | None:
    rule = _match(t, frame)
    return rule.library if rule is not None else None
