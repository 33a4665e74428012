"""The matcher: candidate lines and exit statuses in, Results out, root cause first.

Ordering rule: failures before warnings; a `cause` beats a `symptom` beats a `cascade`
(torchrun's SIGTERMs and ChildFailedError follow any failure); within a tier the earliest line wins. A line that
looks like an error but matches no signature is kept for `diag.unknown` instead of being
forced into the nearest signature.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from ddp_doctor.diagnose import readers
from ddp_doctor.diagnose.catalogue import Signature
from ddp_doctor.diagnose.fatal import FatalReader
from ddp_doctor.diagnose.lines import HEADER, NCCL_COMM, SUMMARY, Origin, clean, origin
from ddp_doctor.diagnose.prefilter import GENERIC_ERROR_RE, LAST_ERROR
from ddp_doctor.report import Evidence, Result, Status
from ddp_doctor.words import plural

MAX_EVIDENCE = 8
MAX_UNKNOWN = 10
_EXCEPTION_LINE = r"\b[A-Z]\w*(?:Error|Exception)\b:"


@dataclass
class _Hit:
    order: int
    source: str
    lineno: int | None
    text: str
    where: Origin


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

    # -- input ------------------------------------------------------------------------------
    def line(self, source: str, lineno: int | None, raw: str, owners: frozenset[str] | None = None) -> None:
        """One candidate line; `owners`, when the multi-matcher gave them, are the signature ids (and
        'generic') whose patterns it holds, so only those signatures are tried."""
        text = clean(raw)
        if not text.strip():
            return
        header = HEADER.match(text)
        if header:
            self._node[source] = header.group("name")
            return
        summary = SUMMARY.match(text)
        if summary and lineno is not None:
            _, rank, host = self._summary.get(source, (0, None, None))
            if summary.group("rank"):
                rank = int(summary.group("rank"))
            self._summary[source] = (lineno, rank, summary.group("host") or host)
            return
        where = origin(text, self._node.get(source))
        comm = NCCL_COMM.search(text)
        if comm and where.pid is not None:
            self._pid_rank.setdefault((where.node, where.pid), int(comm.group("rank")))
            return
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
        if lineno is not None and self._pending_detail.get(source) == lineno - 1:
            self._attach_detail(source, lineno, text, where)
        if owners is None or "fatal" in owners:
            self._fatal.line(source, lineno, text, where, self._order)
        matched = False
        for sig in self.signatures:
            if sig.patterns and (owners is None or sig.id in owners) and sig.matches(text):
                self._record(sig.id, _Hit(self._order, source, lineno, text, where))
                self._last_hit[source] = (sig.id, lineno or 0)
                matched = True
        last = LAST_ERROR.search(text)
        if last and lineno is not None:
            if last.group("rest").strip():
                self._attach_detail(source, lineno, text, where)
            else:
                self._pending_detail[source] = lineno
        if not matched and not last and GENERIC_ERROR_RE.search(text):
            self._unknown_count += 1
            if len(self._unknown) < MAX_UNKNOWN:
                self._unknown.append(_Hit(self._order, source, lineno, text, where))

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
        keyed: list[tuple[tuple[int, int, int, int], Result]] = [
            (
                (_severity_rank(by_id[sid]), by_id[sid].rank_of_tier, tally.first_order, 1),
                _result(by_id[sid], tally),
            )
            for sid, tally in self._tallies.items()
            if harmless or by_id[sid].tier != "harmless"
        ]
        fatal_sig = by_id.get("diag.fatal_signal")
        if fatal_sig is not None:
            keyed += [
                ((_severity_rank(fatal_sig), fatal_sig.rank_of_tier, order, 0), res)
                for order, res in self._fatal.results(fatal_sig)
            ]
        keyed.sort(key=lambda kr: kr[0])
        out = [r for _, r in keyed]
        if unknown:
            found_cause = any(by_id[sid].tier not in ("cascade", "harmless") for sid in self._tallies) or any(
                r.id == "diag.fatal_signal" for r in out
            )
            if not found_cause and (self._unknown or self._failed_exit):
                position = next(
                    (i for i, r in enumerate(out) if by_id[r.id].tier == "cascade" or r.status is not Status.FAIL),
                    len(out),
                )
                out.insert(position, self._unknown_result())
        return out

    def _unknown_result(self) -> Result:
        import re

        exc = re.compile(_EXCEPTION_LINE)
        failing = bool(self._failed_exit) or any(exc.search(h.text) for h in self._unknown)
        evidence = [*self._failed_exit, *(_evidence(h) for h in self._unknown)]
        first = self._unknown[0].text if self._unknown else evidence[0].text
        where = self._unknown[0].where.label() if self._unknown else ""
        return Result(
            id="diag.unknown",
            title="Failure not in the signature catalogue",
            status=Status.FAIL if failing else Status.WARN,
            summary=_short(
                f"{plural(self._unknown_count + len(self._failed_exit), 'error-looking line')} "
                f"{'matches' if self._unknown_count + len(self._failed_exit) == 1 else 'match'} no known signature; "
                f"first{' (' + where + ')' if where else ''}: {first}",
                240,
            ),
            cause="These lines look like a failure, but none of ddp-doctor's signatures recognises them, "
            "so no cause is guessed.",
            remedy="Read the first error line below in context (it is usually the root cause; later ones are often "
            "the cascade). Re-run with NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL for more detail, "
            "and wrap the entry point with torch.distributed.elastic.multiprocessing.errors.record so "
            "torchrun reports the failing rank's traceback.",
            evidence=evidence[: MAX_UNKNOWN + 2],
            observed={"error_lines": self._unknown_count, "failed_exit_statuses": len(self._failed_exit)},
        )


def _severity_rank(sig: Signature) -> int:
    return {Status.FAIL: 0, Status.WARN: 1}.get(sig.severity, 2)


def _rank_from_name(name: str) -> int | None:
    import re

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
        status=sig.severity,
        summary=summary,
        cause=sig.cause,
        remedy=remedy,
        rank=ranks[0] if len(ranks) == 1 else None,
        node=next(iter(tally.nodes)) if len(tally.nodes) == 1 else None,
        observed={"ranks": ranks, "nodes": sorted(tally.nodes), "lines_matched": tally.count},
        evidence=[_evidence(h) for h in tally.hits],
        metrics={"lines_matched": float(tally.count)},
    )
