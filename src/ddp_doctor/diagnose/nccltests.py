"""Read nccl-tests' device lists: a rank listed twice in one test means its processes never formed one job.

nccl-tests (src/common.cu) lists one line per rank, "#  Rank  r Group g Pid p on HOST device d [...] NAME" (older
releases: "#   Rank  r Pid p on HOST ..." or "#   Rank  r on HOST ..."), printed by process 0 only after it gathered
every process's lines over MPI. Built without MPI (MPI=0), every process that mpirun or srun starts is process 0 of a
single-process test of its own: each prints the banner and lists its GPUs as ranks 0 to n-1, and the collectives
never leave the process. The same rank listed twice before a test's closing summary ("# Avg bus bandwidth") is that:
a FAIL. A process's output can also come out whole at its exit (stdout to a pipe is block-buffered), one complete test
after another; complete tests on different hosts each listing the same rank are then that, or tests run one by one on
purpose: a WARN. Complete tests on one host listing the same rank are a loop over GPUs or tests: nothing is said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ddp_doctor.diagnose.catalogue import Signature
from ddp_doctor.diagnose.lines import clean
from ddp_doctor.report import Evidence, Result, Status
from ddp_doctor.words import plural

DEVICE_LINE = re.compile(rb"\bRank\s+\d+\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+\S+\s+device\s+\d+")
"""Whether a log holds nccl-tests' device list at all (searched in the tail's bytes)."""
# The leading "#" is optional: a paste rendered as Markdown loses it (the line became a heading).
_DEVICE = re.compile(
    r"(?:^|#)\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+(?P<pid>\d+)\s+)?on\s+(?P<host>\S+)\s+device\s+\d+"
)
_TEST_END = re.compile(r"(?:^|#)\s*(?:Avg bus bandwidth|Out of bounds values)\b")
"""A test's closing summary: a rank listed again after it belongs to the next test."""
MAX_SHOWN = 6


@dataclass(frozen=True)
class Listed:
    rank: int
    host: str
    pid: int | None
    lineno: int
    line: str


@dataclass(frozen=True)
class Repeats:
    """Device-list lines naming a rank listed before (the first listing included)."""

    lines: list[Listed]
    within_one_test: bool
    """Listed twice before a test's summary: processes running at once, each its own test (a FAIL). Else only
    complete tests on different hosts each list it: one job's processes if they were started as one (a WARN)."""


def repeated_ranks(tail: list[tuple[int, str]]) -> Repeats | None:
    """The ranks nccl-tests listed twice in one test, else those listed by complete tests on different hosts."""
    in_test: dict[int, Listed] = {}
    first_on: dict[tuple[int, str], Listed] = {}
    within: dict[int, Listed] = {}
    across: dict[int, Listed] = {}
    for lineno, raw in tail:
        text = clean(raw)
        if _TEST_END.search(text):
            in_test.clear()
            continue
        m = _DEVICE.search(text)
        if m is None:
            continue
        listed = Listed(int(m["rank"]), m["host"], int(m["pid"]) if m["pid"] else None, lineno, text.strip())
        before = in_test.setdefault(listed.rank, listed)
        if before is not listed:
            within[before.lineno], within[lineno] = before, listed
        first_on.setdefault((listed.rank, listed.host), listed)
        others = [x for (rank, host), x in first_on.items() if rank == listed.rank and host != listed.host]
        if others and first_on[(listed.rank, listed.host)] is listed:
            across.update({x.lineno: x for x in [*others, listed]})
    chosen = within or across
    if not chosen:
        return None
    return Repeats(sorted(chosen.values(), key=lambda x: x.lineno), bool(within))


def result(sig: Signature, source: str, repeats: Repeats) -> Result:
    repeated = repeats.lines
    ranks = sorted({x.rank for x in repeated})
    hosts = sorted({x.host for x in repeated})
    where = (
        f"on {len(hosts)} hosts ({', '.join(hosts[:4])}{', …' if len(hosts) > 4 else ''})"
        if len(hosts) > 1
        else f"on {hosts[0]}"
    )
    listed = f"nccl-tests listed rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks[:8]))}"
    if repeats.within_one_test:
        summary = (
            f"{listed} more than once in one test ({plural(len(repeated), 'device line')} {where}): each process ran a "
            "test of its own instead of being one rank of a job across them"
        )
    else:
        summary = (
            f"{listed} in separate complete tests {where}: if these processes were started as one job (mpirun, "
            "srun), each ran a test of its own instead of being one rank of a job across them; if the tests were "
            "run one by one on purpose, this is expected"
        )
    return Result(
        id=sig.id,
        title=sig.title,
        status=sig.severity if repeats.within_one_test else Status.WARN,
        summary=summary,
        cause=sig.cause,
        remedy=sig.remedy,
        observed={
            "ranks_listed_twice": ranks,
            "hosts": hosts,
            "within_one_test": repeats.within_one_test,
            "lines": [{"rank": x.rank, "host": x.host, "pid": x.pid, "line": x.lineno} for x in repeated[:MAX_SHOWN]],
        },
        evidence=[Evidence(source, x.line, x.lineno) for x in repeated[:MAX_SHOWN]],
    )


# A launcher starting an nccl-tests binary: how many processes it asked for, and how many ranks each drives
# (-t threads x -g GPUs, nccl-tests' options, both 1 by default). srun's -c is CPUs per task, so only mpirun's -np
# / -n and srun's -n / --ntasks count processes.
LAUNCH = re.compile(rb"\b(?:mpirun|mpiexec|orterun|srun)\b[^\n]*\w_perf\b")
"""Whether a log holds such a command at all (searched in the tail's bytes)."""
_LAUNCH = re.compile(r"\b(?:mpirun|mpiexec|orterun|srun)\b(?P<launcher>.*?)\s(?:\S*/)?\w+_perf\b(?P<options>.*)")
_PROCESSES = re.compile(r"(?:^|\s)(?:-np|-n|--np|--ntasks)(?:=|\s+)(\d+)\b")
_HOSTS = re.compile(r"(?:^|\s)(?:-H|--host)(?:=|\s+)(\S+)")
_SLOTS = re.compile(r"([^,:\s]+)(?::(\d+))?")
_NODES = re.compile(r"(?:^|\s)(?:-N|--nodes)(?:=|\s+)(\d+)\b")
_PER_NODE = re.compile(r"(?:^|\s)--ntasks-per-node(?:=|\s+)(\d+)\b")
_PER_PROCESS = re.compile(r"(?:^|\s)(?:-g|--ngpus|-t|--nthreads)(?:=|\s*)(\d+)\b")
_NRANKS = re.compile(r"\bNCCL INFO\b.*\brank \d+ n[Rr]anks (?P<n>\d+)\b")
"""NCCL's own count of a communicator's ranks ("comm 0x... rank 0 nranks 1 cudaDev 0", older "rank 0 nranks 1")."""


@dataclass(frozen=True)
class ShortWorld:
    """A launch of several processes whose test formed fewer ranks than they make together."""

    asked: int
    formed: int
    launch: tuple[int, str]
    seen: list[tuple[int, str]]
    """The lines that show the smaller world: the device list's, or NCCL's rank counts."""


def _processes(launcher: str) -> int:
    """The processes a launcher's options ask for: -np / -n / --ntasks; else Open MPI's -H host[:slots],... (one
    process per slot listed) or srun's -N nodes x --ntasks-per-node; 0 when the line does not say."""
    procs = _PROCESSES.search(launcher)
    if procs is not None:
        return int(procs.group(1))
    hosts = _HOSTS.search(launcher)
    if hosts is not None:
        return sum(int(slots or 1) for _, slots in _SLOTS.findall(hosts.group(1)))
    nodes, per_node = _NODES.search(launcher), _PER_NODE.search(launcher)
    if nodes is not None and per_node is not None:
        return int(nodes.group(1)) * int(per_node.group(1))
    return 0


def _asked(text: str) -> tuple[int, str] | None:
    m = _LAUNCH.search(text)
    if m is None:
        return None
    ranks = _processes(m["launcher"])
    for each in _PER_PROCESS.finditer(m["options"]):
        ranks *= int(each.group(1))
    return ranks, text.strip()


@dataclass
class _Run:
    asked: int
    launch: tuple[int, str]
    listed: list[tuple[int, int, str]] = field(default_factory=list)
    """(rank, line number, line) of the device list."""
    counted: list[tuple[int, int, str]] = field(default_factory=list)
    """(nranks, line number, line) of NCCL's announcements."""

    def short(self) -> ShortWorld | None:
        formed = [(max(r for r, _, _ in self.listed) + 1, self.listed)] if self.listed else []
        formed += [(min(n for n, _, _ in self.counted), self.counted)] if self.counted else []
        for world, lines in formed:
            if 1 < self.asked and world < self.asked:
                return ShortWorld(self.asked, world, self.launch, [(n, line) for _, n, line in lines][:MAX_SHOWN])
        return None


def short_world(tail: list[tuple[int, str]]) -> ShortWorld | None:
    """The first launch asking for more ranks than its test then listed (or NCCL counted): each process alone."""
    runs: list[_Run] = []
    for lineno, raw in tail:
        text = clean(raw)
        launch = _asked(text)
        if launch is not None:
            runs.append(_Run(launch[0], (lineno, launch[1])))
            continue
        if not runs:
            continue
        device = _DEVICE.search(text)
        if device is not None:
            runs[-1].listed.append((int(device["rank"]), lineno, text.strip()))
        counted = _NRANKS.search(text)
        if counted is not None:
            runs[-1].counted.append((int(counted["n"]), lineno, text.strip()))
    return next((short for run in runs if (short := run.short()) is not None), None)


def short_result(sig: Signature, source: str, short: ShortWorld) -> Result:
    return Result(
        id=sig.id,
        title=sig.title,
        status=sig.severity,
        summary=f"the command at line {short.launch[0]} asked for {plural(short.asked, 'rank')}, but the test formed "
        f"{short.formed}: each process ran a test of its own instead of being one rank of a job across them",
        cause=sig.cause,
        remedy=sig.remedy,
        observed={"ranks_asked": short.asked, "ranks_formed": short.formed},
        evidence=[Evidence(source, short.launch[1][:400], short.launch[0])]
        + [Evidence(source, line, n) for n, line in short.seen],
    )


OUTPUT = re.compile(
    rb"nThread\s+\d+\s+nGpus\s+\d+|\w_perf\b|Avg bus bandwidth\s*:|Out of bounds values\s*:|Collective test (?:start|conclud)"
)
"""Whether the log holds nccl-tests output: its banner ("# nThread 1 nGpus 1 minBytes ..."; the oldest releases print
it without the '#'), a binary's name, or its closing summary, which a paste of only a run's end still shows."""
_COMM = re.compile(
    r"(?P<host>[\w.\-]+):(?P<pid>\d+):\d+ \[\d+\] NCCL INFO (?:comm 0x[0-9a-f]+ )?rank (?P<rank>\d+) n[Rr]anks \d+"
)
_SUMMARY = re.compile(r"(?:^|#)\s*Avg bus bandwidth\b")
_START = re.compile(
    r"(?:^|#)\s*(?:nThread\s+\d+\s+nGpus|Using devices\b|Collective test starting:|nccl-tests version\b"
    r"|size\s+count\s+type|\(B\)\s+\(elements\))"
)
"""What a run of nccl-tests prints before its rows (src/common.cu): the banner, the device list, the table's header."""


def repeated_comm_ranks(tail: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """In nccl-tests output with NCCL_DEBUG=INFO: NCCL's rank announcements naming one rank from two processes
    before a test's summary (every nccl-tests process's communicators make one world, so each rank is announced by
    one process only), or two test summaries after one launch of several processes. Each is a process alone."""
    announced: dict[int, tuple[str, str, int, str]] = {}
    summaries: list[tuple[int, str]] = []
    launched = 0
    for lineno, raw in tail:
        text = clean(raw).strip()
        asked = _asked(text)
        if asked is not None:
            launched, summaries = asked[0], []
            continue
        if _SUMMARY.search(text):
            announced.clear()
            summaries.append((lineno, text))
            if launched > 1 and len(summaries) > 1:
                return summaries[:MAX_SHOWN]
            continue
        m = _COMM.search(text)
        if m is None:
            continue
        before = announced.setdefault(int(m["rank"]), (m["host"], m["pid"], lineno, text))
        if (before[0], before[1]) != (m["host"], m["pid"]):
            return [(before[2], before[3]), (lineno, text)]
    return []


def comm_result(sig: Signature, source: str, lines: list[tuple[int, str]]) -> Result:
    return Result(
        id=sig.id,
        title=sig.title,
        status=sig.severity,
        summary=f"nccl-tests output at lines {', '.join(str(n) for n, _ in lines)}: "
        + (
            "two processes each announced the same NCCL rank"
            if "NCCL INFO" in lines[0][1]
            else "one launch of several processes printed a test summary per process"
        )
        + ": each process ran a test of its own instead of being one rank of a job across them",
        cause=sig.cause,
        remedy=sig.remedy,
        observed={"lines": [n for n, _ in lines]},
        evidence=[Evidence(source, line[:400], n) for n, line in lines],
    )


# One run of an nccl-tests binary prints one closing summary, and under MPI only its first process prints at all
# (src/common.cu: PRINT is printf on the main thread of process 0; the footer comes once, after the last size, even
# with -N cycles). A log with a second summary is a second run, or a second process of one launch running alone.


@dataclass
class _Test:
    """The lines of one test's output up to its summary."""

    started: bool = False
    """Its start is in the log: the banner, the device list, the table's header, or the command that ran it."""
    hosts_of: dict[int, set[str]] = field(default_factory=dict)
    """NCCL rank -> the hosts whose NCCL_DEBUG=INFO lines announced it."""


@dataclass(frozen=True)
class Summaries:
    """Test summaries that nothing shows were separate runs on purpose."""

    lines: list[tuple[int, str]]
    hosts: list[str]
    """Two hosts whose tests each held the same NCCL ranks, all on that host; empty when the lines do not say."""
    ranks: list[int]


def separate_summaries(tail: list[tuple[int, str]]) -> Summaries | None:
    """Two tests of which each held the same NCCL ranks on one host of its own; else a second summary whose test
    shows no start after the summary before it (its rows came with no header: another process's output)."""
    tests: list[tuple[_Test, int, str]] = []
    current = _Test()
    for lineno, raw in tail:
        text = clean(raw).strip()
        if _SUMMARY.search(text):
            tests.append((current, lineno, text))
            current = _Test()
            continue
        if _START.search(text) or _DEVICE.search(text) or _asked(text) is not None:
            current.started = True
        comm = _COMM.search(text)
        if comm is not None:
            current.hosts_of.setdefault(int(comm["rank"]), set()).add(comm["host"])
    if len(tests) < 2:
        return None
    lines = [(lineno, text) for _, lineno, text in tests]
    alone = _hosts_alone([test for test, _, _ in tests])
    if alone is not None:
        return Summaries(lines, *alone)
    if any(not test.started for test, _, _ in tests[1:]):
        return Summaries(lines, [], [])
    return None


def _hosts_alone(tests: list[_Test]) -> tuple[list[str], list[int]] | None:
    """Two tests whose NCCL ranks were each all on one host, not the same one, with ranks in common."""
    single: list[tuple[str, set[int]]] = []
    for test in tests:
        hosts = set().union(*test.hosts_of.values())
        if len(hosts) == 1:
            single.append((hosts.pop(), set(test.hosts_of)))
    for i, (host, ranks) in enumerate(single):
        for other, other_ranks in single[i + 1 :]:
            if other != host and ranks & other_ranks:
                return [host, other], sorted(ranks & other_ranks)
    return None


def summaries_result(sig: Signature, source: str, found: Summaries) -> Result:
    at = ", ".join(str(n) for n, _ in found.lines[:MAX_SHOWN])
    if found.hosts:
        ranks = ", ".join(map(str, found.ranks[:8]))
        seen = (
            f"nccl-tests printed a test summary per host (lines {at}), each after NCCL rank"
            f"{'s' if len(found.ranks) > 1 else ''} {ranks} announced on that host alone ({', '.join(found.hosts)})"
        )
    else:
        seen = (
            f"nccl-tests printed {len(found.lines)} test summaries (lines {at}) with no start of a test between them "
            "(no banner, device list or table header)"
        )
    return Result(
        id=sig.id,
        title=sig.title,
        status=Status.WARN,
        summary=f"{seen}: one run prints one summary, and under MPI from its first process only. If these came from "
        "one launch (mpirun, srun), each process ran a test of its own instead of being one rank of a job across "
        "them (nccl-tests built without MPI=1); if the tests were run one by one on purpose, this is expected",
        cause=sig.cause,
        remedy=sig.remedy,
        observed={"summary_lines": [n for n, _ in found.lines], "hosts": found.hosts, "ranks": found.ranks},
        evidence=[Evidence(source, line[:400], n) for n, line in found.lines[:MAX_SHOWN]],
    )
