"""Collective by collective across ranks: the first sequence id where the ranks disagree.

As PyTorch's `torchfrtrace` (torch/distributed/flight_recorder) matches flight-recorder entries: per
process group, the entries with the same collective sequence id must be the same collective on every
member rank: the same op, input and output sizes, dtypes. The first id where they are not is a
**mismatch** (each side named); the first id some members never reached is a **lag** (the ranks that
never entered it named). Without recorder entries (--no-flight-recorder, TORCH_FR_BUFFER_SIZE=0) the
heartbeats' sequence numbers still tell a lag, never a mismatch. A rank whose dump is missing is said
with the reason; the comparison runs over the ranks that have one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ddp_doctor import words

_SHAPES_MAY_DIFFER = re.compile(r"all_?to_?all|^gather|^scatter")
"""all_to_all with uneven splits (a mixture of experts), gather and scatter (only the root has the list) are
right with other shapes on other ranks; torchfrtrace skips their size check too."""


@dataclass(frozen=True)
class Call:
    """One collective as one rank's flight recorder saw it."""

    rank: int
    group: str
    """The process group's name ('0' is the default group)."""
    group_desc: str
    seq: int
    """collective_seq_id: the n-th collective of this rank on this group."""
    op: str
    """'all_reduce' (the recorder's profiling name without the backend)."""
    input_sizes: tuple[tuple[int, ...], ...] = ()
    input_dtypes: tuple[str, ...] = ()
    output_sizes: tuple[tuple[int, ...], ...] = ()
    output_dtypes: tuple[str, ...] = ()
    state: str = ""

    def signature(self) -> tuple[object, ...]:
        """What must be equal on every rank: all of it, except where the op lets ranks differ in shape."""
        if _SHAPES_MAY_DIFFER.search(self.op):
            return (self.op, self.input_dtypes)
        return (self.op, self.input_sizes, self.input_dtypes, self.output_sizes, self.output_dtypes)

    def describe(self) -> str:
        def tensors(sizes: tuple[tuple[int, ...], ...], dtypes: tuple[str, ...]) -> str:
            shown = [f"{dt or '?'}[{', '.join(map(str, s))}]" for s, dt in zip(sizes, dtypes + ("",) * len(sizes))]
            return ", ".join(shown) or "nothing"

        return (
            f"{self.op} of {tensors(self.input_sizes, self.input_dtypes)} "
            f"into {tensors(self.output_sizes, self.output_dtypes)}"
        )


@dataclass(frozen=True)
class RankRecord:
    """What is known of one rank's collectives: its recorder entries, else its sequence numbers."""

    rank: int
    calls: tuple[Call, ...] = ()
    last_seq: Mapping[str, int] | None = None
    """group -> the last sequence number the rank issued there (the heartbeat), where known."""


@dataclass(frozen=True)
class Missing:
    rank: int
    why: str


@dataclass(frozen=True)
class Side:
    ranks: tuple[int, ...]
    call: str


@dataclass(frozen=True)
class Comparison:
    verdict: str
    """mismatch | lag | agree | unknown."""
    group: str = ""
    seq: int | None = None
    sides: tuple[Side, ...] = ()
    """A mismatch: the ranks that called each collective."""
    behind: tuple[int, ...] = ()
    """A lag: the ranks that never entered collective `seq`."""
    reached: int | None = None
    """A lag: how far the behind ranks got on that group."""
    missing: tuple[Missing, ...] = ()
    source: str = "flight recorder"
    """flight recorder | sequence numbers."""

    def group_name(self) -> str:
        return "the default process group" if self.group == "0" else f"process group {self.group}"

    def message(self) -> str:
        if self.verdict == "mismatch":
            sides = "; ".join(f"{words.ranks(list(s.ranks))} called {s.call}" for s in self.sides)
            return f"the ranks called different collectives at #{self.seq} on {self.group_name()}: {sides}"
        if self.verdict == "lag":
            return (
                f"{words.ranks(list(self.behind))} never entered collective #{self.seq} on {self.group_name()} "
                f"(stopped at #{self.reached}; {self.source})"
            )
        if self.verdict == "agree":
            return f"every rank issued the same collectives ({self.source})"
        return "no flight-recorder entries or sequence numbers to compare"

    def missing_text(self) -> str:
        return "; ".join(f"rank {m.rank}: {m.why}" for m in self.missing)


def _members(records: Mapping[int, RankRecord], group: str) -> list[int]:
    present = {
        r
        for r, rec in records.items()
        if any(c.group == group for c in rec.calls) or (rec.last_seq is not None and group in rec.last_seq)
    }
    # The default group holds every rank; another group's members are the ranks that used it.
    return sorted(records) if group == "0" else sorted(present)


def _by_seq(rec: RankRecord, group: str) -> dict[int, Call]:
    return {c.seq: c for c in rec.calls if c.group == group and c.seq > 0}


def _compare_calls(records: Mapping[int, RankRecord], group: str) -> Comparison | None:
    members = [r for r in _members(records, group) if records[r].calls]
    if len(members) < 2:
        return None
    seen = {r: _by_seq(records[r], group) for r in members}
    # The recorder is a ring: compare only the ids every member still holds, from the first of them.
    start = max((min(s) for s in seen.values() if s), default=0)
    top = max((max(s) for s in seen.values() if s), default=0)
    for seq in range(start, top + 1):
        present = {r: s[seq] for r, s in seen.items() if seq in s}
        absent = tuple(r for r in members if r not in present)
        if present and absent:
            reached = max((max(seen[r], default=0) for r in absent), default=0)
            if all(max(seen[r], default=0) < seq for r in absent):
                return Comparison("lag", group, seq, behind=absent, reached=reached)
        signatures: dict[tuple[object, ...], list[int]] = {}
        for r, c in present.items():
            signatures.setdefault(c.signature(), []).append(r)
        if len(signatures) > 1:
            sides = tuple(
                Side(tuple(ranks), present[ranks[0]].describe())
                for ranks in sorted(signatures.values(), key=lambda rs: rs[0])
            )
            return Comparison("mismatch", group, seq, sides=sides)
    return None


def _compare_seqs(records: Mapping[int, RankRecord], group: str) -> Comparison | None:
    seqs = {r: rec.last_seq[group] for r, rec in records.items() if rec.last_seq and group in rec.last_seq}
    if len(seqs) < 2 or min(seqs.values()) == max(seqs.values()):
        return None
    low = min(seqs.values())
    behind = tuple(sorted(r for r, s in seqs.items() if s == low))
    return Comparison("lag", group, low + 1, behind=behind, reached=low, source="sequence numbers")


def compare(records: Mapping[int, RankRecord], missing: Iterable[Missing] = ()) -> Comparison:
    """The first disagreement over every process group: a mismatch before a lag, the default group first."""
    missing = tuple(missing)
    groups = sorted(
        {c.group for rec in records.values() for c in rec.calls}
        | {g for rec in records.values() for g in (rec.last_seq or {})},
        key=lambda g: (g != "0", len(g), g),
    )
    found = [c for g in groups if (c := _compare_calls(records, g)) is not None]
    first = next((c for c in found if c.verdict == "mismatch"), None) or next(iter(found), None)
    if first is None:
        found = [c for g in groups if (c := _compare_seqs(records, g)) is not None]
        first = next(iter(found), None)
    if first is not None:
        return Comparison(
            first.verdict, first.group, first.seq, first.sides, first.behind, first.reached, missing, first.source
        )
    if not groups:
        return Comparison("unknown", missing=missing)
    with_calls = any(rec.calls for rec in records.values())
    return Comparison("agree", missing=missing, source="flight recorder" if with_calls else "sequence numbers")


def _shape(value: object) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, list):
        return ()
    return tuple(tuple(int(d) for d in s) for s in value if isinstance(s, list))


def calls_of_dump(rank: int, dump: Mapping[str, object]) -> tuple[Call, ...]:
    """The collectives in one flight-recorder dump (torch's JSON or pickle layout, version 2.x)."""
    out = []
    entries = dump.get("entries")
    for e in entries if isinstance(entries, list) else []:
        if not isinstance(e, dict) or e.get("is_p2p"):
            continue
        pg = e.get("process_group")
        name, desc = (
            (str(pg[0]), str(pg[1]))
            if isinstance(pg, list | tuple) and len(pg) >= 2
            else (str(e.get("pg_id", "?")), "")
        )
        op = str(e.get("profiling_name", "?")).split(":", 1)[-1]
        try:
            seq = int(e.get("collective_seq_id") or 0)
            call = Call(
                rank,
                name,
                desc,
                seq,
                op,
                _shape(e.get("input_sizes")),
                tuple(str(d) for d in e.get("input_dtypes") or ()),
                _shape(e.get("output_sizes")),
                tuple(str(d) for d in e.get("output_dtypes") or ()),
                str(e.get("state", "")),
            )
        except (TypeError, ValueError):
            continue
        out.append(call)
    return tuple(out)
