"""Read fatal-signal backtraces: which signal ended a process, in which library, and what that means.

A crash handler (UCX's, Python's faulthandler, glog / torch's, glibc's heap checks) announces the
signal; the frames printed below it name libraries. The first frame past the handler's own frames
(and the kernel's signal trampoline) is where the fault happened.
"""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass, field

from ddp_doctor.diagnose.catalogue import Signature
from ddp_doctor.diagnose.lines import Origin
from ddp_doctor.diagnose.readers import Knowledge, Library
from ddp_doctor.report import Evidence, Result

FRAME_WINDOW = 80
"""Frames further than this many lines below an announcement belong to something else."""
_NAMES = {
    "Segmentation fault": 11,
    "Aborted": 6,
    "Bus error": 7,
    "Illegal instruction": 4,
    "Floating point exception": 8,
}


@dataclass
class _Crash:
    order: int
    source: str
    lineno: int | None
    text: str
    where: Origin
    handler: str
    signal: int | None
    library_hint: str | None
    what: str = ""
    """The handler's own words (glibc's message, UCX's fault kind)."""
    frames: list[tuple[int | None, str, str, str]] = field(default_factory=list)
    """(line, library path, function, the line itself) in the order printed."""


class FatalReader:
    def __init__(self, knowledge: Knowledge) -> None:
        self.k = knowledge
        self.crashes: list[_Crash] = []

    def line(self, source: str, lineno: int | None, text: str, where: Origin, order: int) -> None:
        for a in self.k.announcements:
            m = a.pattern.search(text)
            if m is None:
                continue
            groups = m.groupdict()
            num = a.signal
            if groups.get("sig"):
                num = int(groups["sig"])
            elif groups.get("name"):
                name = groups["name"]
                num = _NAMES.get(name) or _signum(name)
            self.crashes.append(
                _Crash(order, source, lineno, text, where, a.handler, num, a.library, groups.get("what") or "")
            )
            return
        crash = self._open(source, lineno)
        if crash is None:
            return
        for f in self.k.frames:
            m = f.search(text)
            if m:
                crash.frames.append((lineno, m.group("lib"), m.group("fn") or "", text))
                return

    def _open(self, source: str, lineno: int | None) -> _Crash | None:
        for crash in reversed(self.crashes):
            if crash.source != source:
                continue
            if lineno is None or crash.lineno is None or 0 < lineno - crash.lineno <= FRAME_WINDOW:
                return crash
            return None
        return None

    def results(self, sig: Signature) -> list[tuple[int, Result]]:
        """(order of the announcement, result) for each crash a library can be named for."""
        out = []
        for crash in self.crashes:
            lib_path, fn = self._faulting_frame(crash)
            lib = self._library(lib_path or crash.library_hint or ("libucs" if crash.handler == "UCX" else ""))
            if lib is None and crash.handler in ("shell", "faulthandler") and not crash.frames:
                continue  # "Segmentation fault (core dumped)" alone: diag.sigsegv says all there is
            out.append((crash.order, self._result(sig, crash, lib, lib_path, fn)))
        return out

    def _faulting_frame(self, crash: _Crash) -> tuple[str | None, str]:
        frames = crash.frames
        i = 0
        while i < len(frames) and (self.k.handler_frames.search(frames[i][2]) or _is_handler_lib(crash, frames[i][1])):
            i += 1
        # The kernel's signal trampoline prints as a bare libc / libpthread offset at the top of the frames
        if i < len(frames) - 1 and _is_libc(frames[i][1]) and not frames[i][2] and crash.handler != "glibc":
            i += 1
        if i < len(frames):
            return frames[i][1], frames[i][2]
        if frames:
            return frames[-1][1], frames[-1][2]
        return None, ""

    def caller(self, crash: _Crash, lib_path: str | None) -> str | None:
        """For a fault inside glibc (memcpy on a bad pointer): the first library below it that is not libc."""
        if not lib_path or not _is_libc(lib_path):
            return None
        below = [f for f in crash.frames if not _is_libc(f[1]) and not self.k.handler_frames.search(f[2])]
        below = [f for f in below if not _is_handler_lib(crash, f[1])]
        lib = self._library(below[0][1]) if below else None
        return lib.name if lib else None

    def _library(self, path: str) -> Library | None:
        if not path:
            return None
        return next((lib for lib in self.k.libraries if lib.match.search(path)), None)

    def _result(self, sig: Signature, crash: _Crash, lib: Library | None, lib_path: str | None, fn: str) -> Result:
        num = crash.signal
        name = _signame(num)
        meaning = self.k.signals.get(num or 0, "")
        where = crash.where.label()
        if lib is not None and lib_path:
            shown = "/".join(lib_path.split("/")[-2:]) if lib_path.endswith(".py") else lib_path.rsplit("/", 1)[-1]
            in_lib = f"in {lib.name} ({shown}{', ' + fn if fn else ''})"
            caller = self.caller(crash, lib_path)
            if caller:
                in_lib += f", called from {caller}"
        elif lib is not None and crash.library_hint:
            in_lib = f"in {lib.name}: {crash.what}" if crash.what else f"in {lib.name}"
        elif lib is not None:
            in_lib = f"caught by {lib.name}'s handler; the frames naming the faulting library are not in the log"
        else:
            in_lib = "library not named in the log"
        summary = f"{where + ', ' if where else ''}line {crash.lineno}: {name} {in_lib}"
        if meaning:
            summary += f". {meaning}"
        evidence = [Evidence(_src(crash.source, where), crash.text[:400], crash.lineno)]
        evidence += [Evidence(_src(crash.source, where), line[:400], n) for n, _path, _fn, line in crash.frames[:6]]
        remedy = (lib.meaning + "\n" if lib else "") + sig.remedy
        return Result(
            id=sig.id,
            title=sig.title,
            status=sig.severity,
            summary=summary,
            cause=sig.cause,
            remedy=remedy,
            rank=crash.where.rank,
            node=crash.where.node,
            observed={
                "signal": name,
                "signal_number": num,
                "handler": crash.handler,
                "library": lib.name if lib else None,
                "library_path": lib_path,
                "function": fn or None,
            },
            evidence=evidence,
        )


def _is_libc(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith(("libc.so", "libc-2", "libpthread"))


def _is_handler_lib(crash: _Crash, path: str) -> bool:
    return crash.handler == "UCX" and ("libucs" in path or "libucm" in path)


def _signum(name: str) -> int | None:
    try:
        return int(_signal.Signals[name])
    except KeyError:
        return None


def _signame(num: int | None) -> str:
    if num is None:
        return "a fatal signal"
    try:
        return f"{_signal.Signals(num).name} (signal {num})"
    except ValueError:
        return f"signal {num}"


def _src(source: str, label: str) -> str:
    return f"{source} [{label}]" if label and label not in source else source
