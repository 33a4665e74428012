"""The one rule that joins static inference and live evidence: live evidence outranks it.

A static check infers from files (no libnccl found, no torch metadata, a torchrun that looks
foreign); the live chain *ran* the thing. When the chain proved what a static check doubted,
the static FAIL becomes a WARN that says what was seen and what the run proved, so one report
never says "cannot run DDP on GPUs" next to a passing NCCL run. The reverse needs no rule: a live
FAIL stays a FAIL whatever the files said. The outcome does not depend on the order of the results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ddp_doctor.checks import variables
from ddp_doctor.report import Result, Status
from ddp_doctor.words import plural

Proof = Callable[[dict[str, list[Result]]], str | None]


def _all_pass(by_id: dict[str, list[Result]], prefix: str) -> list[Result] | None:
    found = [r for key, rs in by_id.items() if key == prefix or key.startswith(prefix + ".") for r in rs]
    if not found or any(r.status in (Status.FAIL, Status.ERROR) for r in found):
        return None
    return found if any(r.status is Status.PASS for r in found) else None


def _ranks_ran_torch(by_id: dict[str, list[Result]]) -> str | None:
    if _all_pass(by_id, "live.init.process_group"):
        return "the ranks imported torch and initialised the process group"
    return None


def _nccl_worked(by_id: dict[str, list[Result]]) -> str | None:
    pg = _all_pass(by_id, "live.init.process_group")
    coll = _all_pass(by_id, "live.collectives")
    if not pg or not coll or "nccl" not in " ".join(r.summary.lower() for r in pg):
        return None
    return f"NCCL initialised and {plural(len(coll), 'collective check')} passed in the live run"


def _launch_worked(by_id: dict[str, list[Result]]) -> str | None:
    return "torchrun started the ranks" if _all_pass(by_id, "live.launch") else None


OUTRANKED_BY: dict[str, Proof] = {
    "env.nccl": _nccl_worked,
    "env.distributed": _ranks_ran_torch,
    "env.torch.installed": _ranks_ran_torch,
    "env.torch.import": _ranks_ran_torch,
    "env.torchrun": _launch_worked,
}
"""static check id -> the live evidence that overrules its FAIL (None: no such evidence)."""


def reconcile(results: list[Result]) -> list[Result]:
    """The same results, each static FAIL that live evidence disproved turned into a WARN."""
    by_id: dict[str, list[Result]] = {}
    for r in results:
        by_id.setdefault(r.id, []).append(r)
    out = []
    for r in results:
        proof = OUTRANKED_BY.get(r.id)
        seen = proof(by_id) if proof is not None and r.status is Status.FAIL else None
        if seen is None:
            out.append(r)
            continue
        out.append(
            replace(
                r,
                status=Status.WARN,
                summary=f"{seen}, so this static inference was wrong: {r.summary}",
                cause=f"live evidence outranks static inference; the static probe saw: {r.cause or r.summary}",
                remedy="nothing to fix for training; if this repeats, report it as a ddp-doctor bug "
                "(observed.static shows what the file-based probe found)",
                observed={**r.observed, "static": {"status": "fail", "summary": r.summary}, "outranked_by": seen},
            )
        )
    return out


def blame_variables(results: list[Result], env: dict[str, str], interfaces: list[str]) -> list[Result]:
    """A live failure caused by a setting (NCCL_NET, NCCL_ALGO, NCCL_PROTO, *_SOCKET_IFNAME) names
    the variable as its root cause instead of NCCL's generic "invalid usage"."""

    out = []
    for r in results:
        if r.status is not Status.FAIL or not r.id.startswith(("live.init", "live.collectives", "live.launch")):
            out.append(r)
            continue
        text = " ".join([r.summary, r.cause or "", *(e.text for e in r.evidence)])
        name = variables.root_cause_variable(env, text, interfaces)
        if name is None:
            out.append(r)
            continue
        spec = variables.spec(name)
        takes = variables.accepted(spec) if spec and spec["type"] not in ("ifname",) else "an existing interface"
        out.append(
            replace(
                r,
                cause=f"{name}={env[name]} is the root cause: {name} takes {takes}"
                + (f" (NCCL said: {r.cause})" if r.cause else ""),
                remedy=f"unset {name} (NCCL chooses by itself), or set it to {takes}",
                observed={**r.observed, "root_cause_variable": name},
            )
        )
    return out
