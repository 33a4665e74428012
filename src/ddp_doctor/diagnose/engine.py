"""The matcher: candidate lines and exit statuses in, Results out, root cause first.

Ordering rule: failures before warnings; a `cause` beats a `symptom` beats a `cascade`
(torchrun's SIGTERMs and ChildFailedError follow any failure); within a tier the earliest line wins. A line that
looks like an error but matches no signature is kept for `diag.unknown` instead of being
forced into the nearest signature.
"""

from __future__ import annotations

import bisect
import re
import signal
from dataclasses import dataclass, field

from ddp_doctor.diagnose import longtail, phases, readers
from ddp_doctor.diagnose.catalogue import Signature
from ddp_doctor.diagnose.fatal import FatalReader
from ddp_doctor.diagnose.lines import HEADER, NCCL_COMM, SUMMARY, Origin, clean, split
from ddp_doctor.diagnose.prefilter import GENERIC_ERROR_RE, LAST_ERROR
from ddp_doctor.diagnose.timestamps import Clock
from ddp_doctor.diagnose.tracebacks import Raised, TracebackReader
from ddp_doctor.report import Evidence, Result, Status
from ddp_doctor.words import plural

MAX_EVIDENCE = 8
MAX_UNKNOWN = 10
MAX_ENDS = 8
MAX_FAIL_LINES = 4096
"""Line numbers of failure-signature hits kept per source, to tell which tracebacks a signature explains."""
EXPLAINS_AFTER = 3
"""A signature hit this many lines after a traceback's exception line still explains it (the message goes on)."""
_EXCEPTION_LINE = re.compile(r"\b(?:[A-Z]\w*(?:Error|Exception)|Exception)\b:")
# NCCL's rank announcement with NCCL's own prefix: read without the general prefix parser (it comes once per
# communicator per rank: the most frequent hit of an NCCL_DEBUG=INFO log).
_COMM_FAST = re.compile(
    r"^(?P<node>[\w.\-]+):(?P<pid>\d+):\d+ \[\d+\] NCCL INFO comm 0x[0-9a-f]+ rank (?P<rank>\d+) nRanks"
)
_STRUCTURE_ONLY = frozenset({"structure"})
_ROOT_CAUSE = re.compile(r"Root Cause \(first observed failure\)")
_IGNORED = re.compile(r"^Exception ignored in")


@dataclass
class _Hit:
    order: int
    source: str
    lineno: int | None
    text: str
    where: Origin
    when: float | None = None


@dataclass
class _Tally:
    first_order: int
    hits: list[_Hit] = field(default_factory=list)
    count: int = 0
    ranks: set[int] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    seen_lines: set[tuple[str, int | None]] = field(default_factory=set)
    detail: str | None = None
    """NCCL's "Last error:" line, the most specific thing NCCL says about an error."""


def signal_of(code: int) -> int | None:
    """-N (Python's 'killed by signal N') or 128+N (a shell's / container engine's)."""
    if code < 0:
        return -code
    if 128 < code <= 128 + 64:
        return code - 128
    return None


def _signame(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Matcher:
    def __init__(self, signatures: tuple[Signature, ...]) -> None:
        self.signatures = signatures
        self._by_signal: dict[int, list[Signature]] = {}
        for sig in signatures:
            for num in sig.signals:
                self._by_signal.setdefault(num, []).append(sig)
        self._tallies: dict[str, _Tally] = {}
        self._unknown: list[_Hit] = []
        self._unknown_count = 0
        self._order = 0
        self._node: dict[str, str | None] = {}
        self._last_hit: dict[str, tuple[str, int]] = {}  # source -> (signature id, lineno) for "Last error:"
        self._pending_detail: dict[str, int] = {}  # source -> lineno whose next line is NCCL's last error
        self._failed_exit: list[Evidence] = []
        self._summary: dict[str, tuple[int, int | None, str | None]] = {}  # source -> (lineno, rank, host)
        self._pid_rank: dict[tuple[str | None, int], int] = {}  # (host, pid) -> rank, from NCCL comm lines
        self._fatal = FatalReader(readers.load())
        self._tracebacks = TracebackReader()
        self._clock = Clock()
        self._when: dict[str, float] = {}  # source -> the last time its lines carried
        self._defaults: dict[str, Origin] = {}  # source -> the rank its file name says
        self._fail_lines: dict[str, list[int]] = {}  # source -> sorted line numbers of failure-signature hits
        self._ends: list[Evidence] = []  # lines that show a process ending badly (readers.yaml ends_badly)
        self._ends_count = 0
        self._ends_rules = readers.load().ends_badly
        self._quiet = frozenset({"structure", *(s.id for s in signatures if s.tier == "harmless")})
        self._by_owner: dict[frozenset[str], tuple[Signature, ...]] = {}
        self._root_cause_rank: int | None = None  # the rank torchrun's summary names as the first failure
        self._in_root_cause: str | None = None
        self._sources: set[str] = set()
        self.signature_checks = 0
        """Signatures tried on a line so far (tests/diagnose/test_info_line_cost.py holds a ceiling on it)."""

    def source(self, name: str, where: Origin | None) -> None:
        """What a file's name says about its lines (a rank's own log): lines without a prefix take it."""
        self._sources.add(name)
        if where is not None:
            self._defaults[name] = where

    # -- input ------------------------------------------------------------------------------
    def line(
        self,
        source: str,
        lineno: int | None,
        raw: str,
        owners: frozenset[str] | None = None,
        context: bool = False,
    ) -> None:
        """One candidate line; `owners`, when the multi-matcher gave them, are the signature ids (and the
        readers' names) whose patterns it holds, so only those are tried. A `context` line holds no pattern:
        only the readers that asked for it (a traceback's exception line, NCCL's last error) read it."""
        if owners == _STRUCTURE_ONLY and self._announced(raw):
            return
        text = clean(raw)
        if not text.strip() or self._structure(source, lineno, text):
            return
        found = self._where(source, lineno, text)
        if found is None:
            return
        where, body = found
        when = self._time(source, body) if context or owners is None or not owners <= self._quiet else None
        if (owners is None or "structure" in owners) and _IGNORED.match(body.strip()):
            self._tracebacks.ignored_next(source, where)
        if context or owners is None or "traceback" in owners or self._tracebacks.following:
            self._tracebacks.line(source, lineno, body, where, self._order, when)
        if lineno is not None and self._pending_detail.get(source) == lineno - 1:
            self._attach_detail(source, lineno, text, where)
        if not context:
            self._read(source, lineno, text, body, where, when, owners)

    def _announced(self, raw: str) -> bool:
        """NCCL's rank announcement with NCCL's own prefix, read without the general prefix parser."""
        fast = _COMM_FAST.match(raw)
        if fast is not None:
            self._pid_rank.setdefault((fast.group("node"), int(fast.group("pid"))), int(fast.group("rank")))
        return fast is not None

    def _structure(self, source: str, lineno: int | None, text: str) -> bool:
        """File headers and torchrun's failure-summary fields: they name where the next lines come from."""
        header = HEADER.match(text)
        if header:
            self._node[source] = header.group("name")
            return True
        summary = SUMMARY.match(text)
        if not summary or lineno is None:
            return False
        _, rank, host = self._summary.get(source, (0, None, None))
        if summary.group("rank"):
            rank = int(summary.group("rank"))
            if self._in_root_cause == source and self._root_cause_rank is None:
                self._root_cause_rank = rank
        self._summary[source] = (lineno, rank, summary.group("host") or host)
        return True

    def _where(self, source: str, lineno: int | None, text: str) -> tuple[Origin, str] | None:
        """The line's origin and its message; None for an NCCL rank announcement (recorded, nothing to read)."""
        where, body = split(text, self._node.get(source), self._defaults.get(source))
        comm = NCCL_COMM.search(text)
        if comm and where.pid is not None:
            self._pid_rank.setdefault((where.node, where.pid), int(comm.group("rank")))
            return None
        self._order += 1
        where = self._in_summary(source, lineno, where)
        if where.rank is None and where.pid is not None and (where.node, where.pid) in self._pid_rank:
            where = Origin(
                rank=self._pid_rank[(where.node, where.pid)],
                local_rank=where.local_rank,
                node=where.node,
                gpu=where.gpu,
                pid=where.pid,
            )
        return where, body

    def _read(
        self,
        source: str,
        lineno: int | None,
        text: str,
        body: str,
        where: Origin,
        when: float | None,
        owners: frozenset[str] | None,
    ) -> None:
        """A line that holds a pattern: the crash handlers' reader, endings, signatures, NCCL's last error."""
        if owners is None or "fatal" in owners:
            self._fatal.line(source, lineno, text, where, self._order)
        ended = (owners is None or "ends" in owners) and self._ends_badly(source, lineno, body, where)
        if ended and _ROOT_CAUSE.search(body):
            self._in_root_cause = source
        matched = False
        tried = self._signatures_for(owners)
        self.signature_checks += len(tried)
        for sig in tried:
            if sig.matches(text):
                self._record(sig.id, _Hit(self._order, source, lineno, text, where, when))
                self._last_hit[source] = (sig.id, lineno or 0)
                matched = True
                if sig.severity is Status.FAIL and lineno is not None:
                    kept = self._fail_lines.setdefault(source, [])
                    if len(kept) < MAX_FAIL_LINES:
                        bisect.insort(kept, lineno)
        last = LAST_ERROR.search(text)
        if last and lineno is not None:
            if last.group("rest").strip():
                self._attach_detail(source, lineno, text, where)
            else:
                self._pending_detail[source] = lineno
        if not matched and not last and GENERIC_ERROR_RE.search(text):
            self._unknown_count += 1
            if len(self._unknown) < MAX_UNKNOWN:
                self._unknown.append(_Hit(self._order, source, lineno, text, where, when))

    def _signatures_for(self, owners: frozenset[str] | None) -> tuple[Signature, ...]:
        if owners is None:
            return tuple(s for s in self.signatures if s.patterns)
        found = self._by_owner.get(owners)
        if found is None:  # catalogue order, so ties between signatures on one line break the same way always
            found = self._by_owner[owners] = tuple(s for s in self.signatures if s.patterns and s.id in owners)
        return found

    def _time(self, source: str, body: str) -> float | None:
        when = self._clock.when(body)
        if when is None:
            return self._when.get(source)
        self._when[source] = when
        return when

    def _ends_badly(self, source: str, lineno: int | None, body: str, where: Origin) -> bool:
        for rule in self._ends_rules:
            if rule.pattern.search(body):
                self._ends_count += 1
                if len(self._ends) < MAX_ENDS:
                    label = where.label()
                    src = f"{source} [{label}]" if label and label not in source else source
                    self._ends.append(Evidence(src, f"{rule.says}: {_short(body, 300)}", lineno))
                return True
        return False

    def _in_summary(self, source: str, lineno: int | None, where: Origin) -> Origin:
        # Lines of one torchrun summary entry ("rank : 1 (local_rank: 1)", "exitcode : -9", "traceback : ...")
        # belong to the rank named just above them.
        entry = self._summary.get(source)
        if entry is None or lineno is None or not 0 < lineno - entry[0] <= 4 or where.rank is not None:
            return where
        return Origin(
            rank=entry[1], local_rank=where.local_rank, node=where.node or entry[2], gpu=where.gpu, pid=where.pid
        )

    def exit_code(self, name: str, code: int | None) -> None:
        if code is None or code == 0:
            return
        self._order += 1
        num = signal_of(code)
        if num is None:
            self._failed_exit.append(Evidence(name, f"exit status {code}"))
            return
        text = f"exit status {code}: killed by {_signame(num)} ({num})"
        sigs = self._by_signal.get(num)
        if not sigs:
            self._failed_exit.append(Evidence(name, text))
            return
        for sig in sigs:
            self._record(sig.id, _Hit(self._order, name, None, text, Origin(rank=_rank_from_name(name))))

    # -- bookkeeping ------------------------------------------------------------------------
    def _record(self, sid: str, hit: _Hit) -> None:
        tally = self._tallies.setdefault(sid, _Tally(first_order=hit.order))
        key = (hit.source, hit.lineno)
        if hit.lineno is not None and key in tally.seen_lines:
            return  # same line seen twice (a line longer than a chunk, or fed as context then as a candidate)
        if len(tally.seen_lines) < 10_000:
            tally.seen_lines.add(key)
        tally.count += 1
        if hit.where.rank is not None:
            tally.ranks.add(hit.where.rank)
        if hit.where.node:
            tally.nodes.add(hit.where.node)
        if len(tally.hits) < MAX_EVIDENCE:
            tally.hits.append(hit)

    def _attach_detail(self, source: str, lineno: int, text: str, where: Origin) -> None:
        self._pending_detail.pop(source, None)
        last = self._last_hit.get(source)
        if last is None or lineno - last[1] > 6:
            return
        tally = self._tallies[last[0]]
        detail = _Hit(self._order, source, lineno, text, where)
        if tally.detail is None:
            tally.detail = LAST_ERROR.sub(lambda m: m.group("rest"), text).strip() or text
        if all(h.lineno != lineno for h in tally.hits):
            tally.hits.append(detail)  # NCCL's "Last error" is the most useful line: always kept

    # -- output -----------------------------------------------------------------------------
    @property
    def pid_rank(self) -> dict[tuple[str | None, int], int]:
        """(host, pid) -> rank, as NCCL's communicator lines announced them."""
        return self._pid_rank

    def results(self, unknown: bool = True, harmless: bool = True) -> list[Result]:
        by_id = {s.id: s for s in self.signatures}
        # Failures before warnings before harmless; then cause > symptom > cascade; then the earliest line;
        # a fatal-signal reading before a signature found on the same line (it names the library too).
        fatal_sig = by_id.get("diag.fatal_signal")
        fatal = self._fatal.results(fatal_sig) if fatal_sig is not None else []
        first = {sid: tally.first_order for sid, tally in self._tallies.items()}
        if len(self._sources) > 1 and not fatal and all(t.hits[0].when is not None for t in self._tallies.values()):
            # Several logs of one job (a file per rank): the earliest line is the earliest by the logs' own clocks,
            # not the one in the file read first.
            by_time = sorted(self._tallies, key=lambda sid: (self._tallies[sid].hits[0].when or 0.0, first[sid]))
            first = {sid: i for i, sid in enumerate(by_time)}
        keyed: list[tuple[tuple[int, int, int, int], Result]] = [
            (
                (_severity_rank(by_id[sid], tally.count), by_id[sid].rank_of_tier, first[sid], 1),
                _result(by_id[sid], tally),
            )
            for sid, tally in self._tallies.items()
            if harmless or by_id[sid].tier != "harmless"
        ]
        if fatal_sig is not None:
            keyed += [((_severity_rank(fatal_sig), fatal_sig.rank_of_tier, order, 0), res) for order, res in fatal]
        keyed.sort(key=lambda kr: kr[0])
        out = [r for _, r in keyed]
        self._tracebacks.finish()
        raised = longtail.unwrap([r for r in self._tracebacks.raised if not r.ignored])
        self._place_known(out, raised)
        if not unknown:
            return out
        table = phases.table()
        unexplained = [r for r in raised if not self._explained(r) and not table.is_consequence(r.exception)]
        if any(r.status is Status.FAIL for r in out) or any(not r.cut for r in unexplained):
            # A traceback the log cuts off before its exception line says less than any failure that is named.
            unexplained = [r for r in unexplained if not r.cut]
        root = self._first(unexplained)
        causes = [
            r for r in out if r.status is Status.FAIL and (r.id == "diag.fatal_signal" or by_id[r.id].tier == "cause")
        ]
        position = next(
            (
                i
                for i, r in enumerate(out)
                if r.status is not Status.FAIL or (r.id != "diag.fatal_signal" and by_id[r.id].tier != "cause")
            ),
            len(out),
        )
        if root is not None:
            # An exception no signature explains, on a rank that was not only reacting to another's failure.
            out.insert(position, longtail.result(root, unexplained))
            return out
        failed = any(r.status is Status.FAIL for r in out)
        if not causes and (
            self._unknown or self._failed_exit or (self._ends and not failed) or (raised and not failed)
        ):
            at = next(
                (i for i, r in enumerate(out) if by_id[r.id].tier == "cascade" or r.status is not Status.FAIL), len(out)
            )
            out.insert(at, _with_warning(self._unknown_result(raised, failed), out, by_id))
        return out

    def _first(self, candidates: list[Raised]) -> Raised | None:
        named = [r for r in candidates if self._root_cause_rank is not None and r.where.rank == self._root_cause_rank]
        return longtail.first(named or candidates)

    def _explained(self, r: Raised) -> bool:
        """A failure signature matched the traceback's lines (its exception line or the message below it)."""
        kept = self._fail_lines.get(r.source)
        if not kept or r.lineno is None:
            return False
        low = r.start if r.start is not None else r.lineno
        i = bisect.bisect_left(kept, low)
        return i < len(kept) and kept[i] <= r.lineno + EXPLAINS_AFTER

    def _place_known(self, out: list[Result], raised: list[Raised]) -> None:
        """A signature that matched a traceback's lines also says where it was raised (phase, library, frames)."""
        for res in out:
            if res.status is not Status.FAIL or "phase" in res.observed:
                continue
            lines = {(e.source.split(" [", 1)[0], e.line) for e in res.evidence if e.line is not None}
            for r in raised:
                if r.lineno is None or not any(
                    src == r.source and (r.start or r.lineno) <= n <= r.lineno + EXPLAINS_AFTER for src, n in lines
                ):
                    continue
                p = longtail.placement(r)
                if p.phase is None and p.raised_in is None:
                    break
                res.observed.update(longtail.observed(r, p))
                words = longtail.where_words(p)
                if words:
                    res.summary = f"{res.summary} — {words}"
                break

    def _unknown_result(self, raised: list[Raised], failed: bool) -> Result:
        # A process that ended badly is a failure even when no signature knows why: never a healthy verdict.
        ended = bool(self._ends) or bool(self._failed_exit) or bool(raised)
        failing = ended or any(_EXCEPTION_LINE.search(h.text) for h in self._unknown)
        evidence = [*self._failed_exit, *self._ends[:4], *(_evidence(h) for h in self._unknown)]
        if not evidence and raised:
            evidence = [Evidence(r.source, _short(r.line, 400), r.lineno) for r in raised[:4]]
        first_hit = self._unknown[0] if self._unknown else None
        first = first_hit.text if first_hit else evidence[0].text
        where = first_hit.where.label() if first_hit else ""
        n = self._unknown_count + len(self._failed_exit)
        if first_hit is None and (self._ends or raised):
            summary = f"the log shows a process ending badly ({evidence[0].text}); no signature names why"
            if failed:
                summary = f"{summary}, and the failures found explain only part of it"
        else:
            summary = (
                f"{plural(n, 'error-looking line')} {'matches' if n == 1 else 'match'} no known signature; "
                f"first{' (' + where + ')' if where else ''}: {first}"
            )
        return Result(
            id="diag.unknown",
            title="Failure not in the signature catalogue",
            status=Status.FAIL if failing else Status.WARN,
            summary=_short(summary, 240),
            cause="These lines show a failure, but none of ddp-doctor's signatures recognises them, so no cause is "
            "guessed."
            if failing
            else "These lines look like a failure, but none of ddp-doctor's signatures recognises them, so no cause "
            "is guessed.",
            remedy="Read the first error line below in context (it is usually the root cause; later ones are often "
            "the cascade). Re-run with NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL for more detail, "
            "and wrap the entry point with torch.distributed.elastic.multiprocessing.errors.record so "
            "torchrun reports the failing rank's traceback.",
            evidence=evidence[: MAX_UNKNOWN + 2],
            observed={
                "error_lines": self._unknown_count,
                "failed_exit_statuses": len(self._failed_exit),
                "ended_badly_lines": self._ends_count,
            },
        )


def _with_warning(unknown: Result, out: list[Result], by_id: dict[str, Signature]) -> Result:
    """A process ended badly with no failure named: a warning of a cause found in the same log may be why."""
    if unknown.status is not Status.FAIL or unknown.observed.get("error_lines"):
        return unknown
    warned = next((r for r in out if r.status is Status.WARN and by_id[r.id].tier == "cause"), None)
    if warned is None:
        return unknown
    unknown.summary = _short(f"{unknown.summary}; a warning found in the log may be why: {warned.title}", 400)
    unknown.cause = (
        "These lines show a failure that no failure signature names; the warning found in the same log is a known "
        "cause that can end a run this way."
    )
    unknown.remedy = f"Start with the warning {warned.id} ({warned.title}): {warned.remedy}\n{unknown.remedy}"
    unknown.observed["may_be_why"] = warned.id
    return unknown


def _severity_rank(sig: Signature, count: int = 1) -> int:
    return {Status.FAIL: 0, Status.WARN: 1}.get(sig.status_for(count), 2)


def _rank_from_name(name: str) -> int | None:
    m = re.search(r"rank[ _-]?(\d+)", name)
    return int(m.group(1)) if m else None


def _evidence(hit: _Hit) -> Evidence:
    label = hit.where.label()
    return Evidence(
        f"{hit.source} [{label}]" if label and label not in hit.source else hit.source,
        _short(hit.text, 400),
        hit.lineno,
    )


def _result(sig: Signature, tally: _Tally) -> Result:
    first = tally.hits[0]
    loc = first.where.label() or first.source
    line = f"line {first.lineno}" if first.lineno is not None else first.source
    others = f" (+{plural(tally.count - 1, 'more line')})" if tally.count > 1 else ""
    ranks = sorted(tally.ranks)
    summary = f"{loc}, {line}: {_short(first.text)}{others}; a healthy run prints no such line"
    if first.lineno is None:
        summary = f"{first.source}: {first.text}{others}; a healthy run exits 0"
    if tally.detail:
        summary = f"{loc}, {line}: {_short(first.text, 100)}; NCCL's last error: {_short(tally.detail, 120)}"
    remedy = sig.remedy
    terse = sig.hypotheses.get("terse", ())
    if terse:  # the line alone does not say which of several known causes it is: name them in order
        ranked = "\n".join(f"  {i}. {h.cause}\n     test: {h.test}" for i, h in enumerate(terse, 1))
        remedy = f"Likely causes, most likely first:\n{ranked}\n{remedy}"
    if sig.unless:
        summary = f"{loc}, {line}: {_short(first.text)}{others}; harmless unless {sig.unless}"
    return Result(
        id=sig.id,
        title=sig.title,
        status=sig.status_for(tally.count),
        summary=summary,
        cause=sig.cause,
        remedy=remedy,
        rank=ranks[0] if len(ranks) == 1 else None,
        node=next(iter(tally.nodes)) if len(tally.nodes) == 1 else None,
        observed={"ranks": ranks, "nodes": sorted(tally.nodes), "lines_matched": tally.count},
        evidence=[_evidence(h) for h in tally.hits],
        metrics={"lines_matched": float(tally.count)},
    )
