"""Words for a failure no signature knows, read from its traceback: who, what, where, in which phase, what next.

The first failing rank is the one whose uncaught exception came first (by the time its log printed, where the
logs carry one; else in reading order) among those that are not a consequence of another failure (a lost peer,
a launcher's report, a signal sent to stop the others). Its exception line, the deepest library frame, the
user's last frame and the phase (phases.yaml) make the summary; the phase and library pick the next step.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddp_doctor.diagnose import phases
from ddp_doctor.diagnose.lines import Origin
from ddp_doctor.diagnose.tracebacks import Raised, TracebackReader
from ddp_doctor.report import Evidence, Result, Status
from ddp_doctor.words import plural

MAX_SHOWN_FRAMES = 4


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def who(r: Raised) -> str:
    label = r.where.label()
    return label or r.source


def unwrap(raised: Sequence[Raised]) -> list[Raised]:
    """Without the wrappers (a DataLoader worker's "Caught X", mp.spawn's ProcessRaisedException) whose carried
    traceback follows on the same origin: that one is the real error."""
    t = phases.table()
    out = []
    for i, r in enumerate(raised):
        if t.is_wrapper(r.exception, r.message) and any(
            o.source == r.source and o.where == r.where for o in raised[i + 1 :]
        ):
            continue
        out.append(r)
    return out


def read_traceback(text: str, source: str, where: Origin) -> Raised | None:
    """The exception one process's traceback text ends with (after a chain, the one that propagated), read by
    the reader explain uses: `run` names a rank's failure with the same exception line and phase."""
    reader = TracebackReader()
    for i, line in enumerate(text.splitlines(), 1):
        reader.line(source, i, line, where, i, None)
    reader.finish()
    raised = unwrap(reader.raised)
    return raised[-1] if raised else None


def phase_noun(p: phases.Placement) -> str | None:
    """The phase as a noun phrase ('device setup (selecting or initialising the GPU)'), for 'in <phase>'."""
    if p.phase is None:
        return None
    head, _, rest = p.phase.words.partition(" ")
    return rest if head in ("in", "at", "while") and rest else p.phase.words


def first(candidates: Sequence[Raised]) -> Raised | None:
    """The earliest by the logs' own times when every candidate has one, else in reading order."""
    if not candidates:
        return None
    timed = all(r.when is not None for r in candidates)
    return min(candidates, key=lambda r: ((r.when or 0.0) if timed else 0.0, r.order))


def placement(r: Raised) -> phases.Placement:
    return phases.place(r.frames, r.exception)


def where_words(p: phases.Placement) -> str:
    """'in the forward pass (DDP, torch/nn/parallel/distributed.py:1640 in _pre_forward; your code: train.py:57 in
    main)', or '' when the frames say nothing."""
    parts = []
    if p.raised_in is not None:
        parts.append(f"{p.library or p.raised_library}; raised at {p.raised_in.short()}")
    if p.user_frame is not None:
        parts.append(f"your code: {p.user_frame.short()}")
    inside = f"({'; '.join(parts)})" if parts else ""
    return f"{p.phase.words} {inside}".strip() if p.phase else inside


def observed(r: Raised, p: phases.Placement) -> dict[str, object]:
    return {
        "exception": r.exception,
        "message": r.message,
        "phase": p.phase.name if p.phase else None,
        "library": p.library,
        "raised_at": p.raised_in.short() if p.raised_in else None,
        "user_frame": p.user_frame.short() if p.user_frame else None,
    }


def _evidence(r: Raised) -> list[Evidence]:
    src = f"{r.source} [{r.where.label()}]" if r.where.label() and r.where.label() not in r.source else r.source
    out = []
    if r.start is not None:
        out.append(Evidence(src, "Traceback (most recent call last):", r.start))
    shown = list(zip(r.frames, r.frame_lines or (None,) * len(r.frames), strict=False))[-MAX_SHOWN_FRAMES:]
    out += [Evidence(src, f'File "{f.path}", line {f.line}, in {f.func}', n) for f, n in shown]
    out.append(Evidence(src, _short(r.line, 400), r.lineno))
    return out


def result(root: Raised, others: Sequence[Raised]) -> Result:
    """diag.unknown for the first failing rank's exception, in its own words."""
    p = placement(root)
    place = where_words(p)
    rank = who(root)
    after = sorted({who(o) for o in others if o is not root and who(o) != rank})
    tail = f"; {plural(len(after), 'other origin')} failed after it ({', '.join(after[:4])})" if after else ""
    summary = f"{rank} raised {_short(root.text, 200)}" + (f" {place}" if place else "") + tail
    phase_words = p.phase.words if p.phase else "(the traceback does not say which phase)"
    library = f", inside {p.library}" if p.library else ""
    cause = (
        f"No signature in the catalogue knows this error, so it is read from the traceback: {rank} failed "
        f"{phase_words}{library}, with {root.exception or 'an exception the log cuts off'}. It is the first "
        "uncaught exception in the log that is not "
        "a consequence of another rank's failure; the errors after it usually are."
    )
    steps = [p.next_step] if p.next_step else []
    if p.user_frame is not None:
        steps.append(f"The last frame in your own code is {p.user_frame.short()}: start reading there.")
    inside = p.raised_library or p.library
    if p.raised_in is not None and inside:
        pip = f" (`pip show {p.package}`)" if p.package else ""
        steps.append(
            f"It was raised inside {inside}'s own code: note its version{pip} and look for this message in its "
            "issue tracker and release notes. A version of it that does not match the libraries it drives (torch, "
            "Transformers, vLLM) or a bug fixed in a newer release are common causes of errors raised this deep."
        )
    steps.append(
        "If the message is not enough, re-run with TORCH_DISTRIBUTED_DEBUG=DETAIL (and NCCL_DEBUG=INFO for NCCL) "
        "and search the exception line in the issue tracker of the library that raised it."
    )
    evidence = _evidence(root)
    evidence += [Evidence(o.source, _short(o.line, 300), o.lineno) for o in others if o is not root][:4]
    return Result(
        id="diag.unknown",
        title=f"{root.exception.rsplit('.', 1)[-1] or 'Uncaught exception'} {p.phase.words if p.phase else 'raised'}",
        status=Status.FAIL,
        summary=_short(summary, 480),
        cause=cause,
        remedy="\n".join(steps),
        rank=root.where.rank,
        node=root.where.node,
        evidence=evidence,
        observed={**observed(root, p), "origin": rank, "failed_after": after},
    )
