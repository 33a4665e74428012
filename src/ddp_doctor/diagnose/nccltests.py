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
from dataclasses import dataclass

from ddp_doctor.diagnose.catalogue import Signature
from ddp_doctor.diagnose.lines import clean
from ddp_doctor.report import Evidence, Result, Status

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
            f"{listed} more than once in one test ({len(repeated)} device lines {where}): each process ran a "
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
