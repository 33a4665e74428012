"""Parent side of `bench`: start the ranks through the live chain's launcher, merge their payloads.

No torch here: the ranks import it (bench/worker.py), the parent only reads their rank-N.json.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from ddp_doctor.bench import formulas
from ddp_doctor.bench.records import RankPayload, RankSweep
from ddp_doctor.bench.results import TITLES, op_result, result_id
from ddp_doctor.diagnose import diagnose
from ddp_doctor.health import gpu as health
from ddp_doctor.live.launch import RunOutcome, TorchrunSpec, launch
from ddp_doctor.report import Evidence, Report, Result, Status
from ddp_doctor.rundir.records import Heartbeat


@dataclass(frozen=True)
class SweepSpec:
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    min_bytes: int
    max_bytes: int
    modes: tuple[bool, ...]
    """True = in place, False = out of place."""
    iters: int
    warmup_iters: int
    check: bool
    nproc: int
    backend: str
    timeout_s: float
    gpu_health: bool = False
    python: str | None = None
    """The target interpreter (env/target.py) whose torchrun runs the ranks."""

    def worker_config(self) -> RankSweep:
        return RankSweep(
            ops=self.ops,
            dtypes=self.dtypes,
            sizes=tuple(formulas.sizes(self.min_bytes, self.max_bytes)),
            modes=self.modes,
            iters=self.iters,
            warmup_iters=self.warmup_iters,
            check=self.check,
            backend=self.backend,
            gpu_health=self.gpu_health,
            # Below the launch deadline so a stuck collective raises in the rank before it is killed.
            pg_timeout_s=max(10.0, min(120.0, self.timeout_s * 0.8)),
        )


def launch_spec(spec: SweepSpec) -> TorchrunSpec:
    return TorchrunSpec(
        entry_module="ddp_doctor.bench.worker",
        entry_args=["--config", spec.worker_config().to_json()],
        nproc=spec.nproc,
        backend=spec.backend,
        timeout_s=spec.timeout_s,
        env={},
        python=spec.python,
    )


def run(spec: SweepSpec, report: Report, on_poll: Callable[[dict[int, Heartbeat]], None] | None = None) -> Report:
    outcome = launch(launch_spec(spec), on_poll=on_poll)
    return merge(spec, outcome, report)


def _with_rank(rank: int, numbers: health.GpuHealth) -> health.GpuHealth:
    tagged = health.GpuHealth(rank=rank)
    tagged.update(numbers)
    return tagged


def _primary(ranks: dict[int, RankPayload]) -> RankPayload | None:
    if not ranks:
        return None
    return ranks[min(ranks)]


def merge(spec: SweepSpec, outcome: RunOutcome, report: Report) -> Report:
    # The rank files are the JSON bench/worker.py wrote: RankPayload is their shape.
    ranks = {r: cast(RankPayload, res.payload()) for r, res in outcome.ranks.items()}
    primary = _primary(ranks)
    world = int(primary["world_size"]) if primary else spec.nproc
    report.facts = {
        "source": "ddp-doctor",
        "backend": spec.backend,
        "world_size": world,
        "devices": [{"rank": r, **(p.get("facts") or {})} for r, p in sorted(ranks.items())],
        "sweep": {k: v for k, v in json.loads(spec.worker_config().to_json()).items() if k != "pg_timeout_s"},
        "launch": {
            "argv": outcome.argv[:-1] + ["<config>"] if outcome.argv else [],
            "returncode": outcome.returncode,
            "timed_out": outcome.timed_out,
            "duration_s": outcome.duration_s,
            "launcher": getattr(outcome, "launcher_source", None),
        },
    }
    if primary:
        facts = primary.get("facts") or {}
        report.facts["torch"] = facts.get("torch")
        report.facts["nccl"] = facts.get("nccl")
    several = len(spec.dtypes) > 1
    if spec.gpu_health:
        per_gpu = [
            _with_rank(r, p.get("health") or {"error": "this rank wrote no health numbers"})
            for r, p in sorted(ranks.items())
        ]
        report.extend(health.evaluate(per_gpu))
    done: set[tuple[str, str]] = set()
    for entry in (primary or RankPayload()).get("ops", []):
        report.add(
            op_result(
                entry["op"], entry["dtype"], entry, several_dtypes=several, world_size=world, backend=spec.backend
            )
        )
        done.add((entry["op"], entry["dtype"]))
    failure = _launch_failure(spec, outcome, ranks, done)
    if failure:
        report.extend(failure)
        report.extend(_not_measured(spec, done, several))
        # A dead or stuck rank explains the ops that failed after it: the diagnosis (root cause
        # first) if there is one, else the launch result.
        report.root_cause = failure[1].id if len(failure) > 1 else failure[0].id
    return report


def _not_measured(spec: SweepSpec, done: set[tuple[str, str]], several: bool) -> list[Result]:
    """An op the ranks never reported is an error, never a silent gap: whether rank 0 still wrote its
    own failure before torchrun stopped it is a race, and the verdict must not depend on it."""
    return [
        Result(
            result_id(op, dt, several),
            f"{TITLES.get(op, op)} ({dt})",
            Status.ERROR,
            f"{op} was not measured: the run ended before any rank reported it (see bench.launch)",
            cause="a rank died or hung before or during this op, so its bandwidth is unknown",
            remedy=f"fix the failure named in bench.launch, then rerun with --ops {op}",
        )
        for op in spec.ops
        for dt in spec.dtypes
        if (op, dt) not in done
    ]


def _how_it_ended(code: int) -> str:
    number = -code if code < 0 else code - 128 if code > 128 else 0
    if number:
        try:
            return f"was killed by signal {number} ({signal.Signals(number).name})"
        except ValueError:
            return f"was killed by signal {number}"
    return f"exited with {code}"


def _failure_summary(spec: SweepSpec, outcome: RunOutcome, unfinished: list[int], done: set[tuple[str, str]]) -> str:
    """How the run ended, where the unfinished ranks were, and what was not measured."""
    where = (
        ", ".join(
            f"rank {r}: {b.phase}" + (f" ({b.step})" if b.step else "")
            for r, b in sorted(outcome.heartbeats.items())
            if r in unfinished
        )
        or "no rank reported progress"
    )
    missing = [f"{op} {dt}" for op in spec.ops for dt in spec.dtypes if (op, dt) not in done]
    if outcome.preflight_error:
        return f"the ranks were not started: {outcome.preflight_error}"
    if outcome.timed_out:
        return (
            f"the sweep did not finish within --timeout {spec.timeout_s:g} s; {where}; "
            f"not measured: {', '.join(missing) or 'none'}"
        )
    ended = "; ".join(
        f"{name} {_how_it_ended(code)}"
        for name, code in sorted(outcome.exit_codes.items())
        if name.startswith("rank ") and code != 0
    )
    return (
        f"torchrun exited with {outcome.returncode}"
        + (f"; {ended}" if ended else "")
        + f"; unfinished ranks {unfinished or 'none'} ({where})"
        + (f"; not measured: {', '.join(missing)}" if missing else "")
    )


def _failure_evidence(outcome: RunOutcome) -> list[Evidence]:
    """The last frame of each stuck rank's stack, then the last lines of each log."""
    evidence = [
        Evidence(f"rank-{r}.stack", text.strip().splitlines()[-1][:300])
        for r, text in sorted(outcome.stacks.items())
        if text.strip()
    ]
    for name, lines in sorted(outcome.logs.items()):
        tail = [ln for ln in lines if ln.strip()][-3:]
        evidence.extend(Evidence(name, ln[:300]) for ln in tail)
    return evidence


def _launch_failure(
    spec: SweepSpec, outcome: RunOutcome, ranks: dict[int, RankPayload], done: set[tuple[str, str]]
) -> list[Result]:
    unfinished = sorted(set(range(spec.nproc)) - {r for r, p in ranks.items() if p.get("finished")})
    if not outcome.preflight_error and not outcome.timed_out and outcome.returncode == 0 and not unfinished:
        return []
    summary = _failure_summary(spec, outcome, unfinished, done)
    results = [
        Result(
            "bench.launch",
            "bench ranks ran to the end",
            Status.FAIL,
            summary,
            cause="a rank died, hung in a collective, or the sweep needs more time than the deadline gives",
            remedy="see the diagnosis below; for a slow but healthy run raise --timeout or lower --max-bytes / --iters; "
            "`ddp-doctor check` tests the chain (torchrun, init, collectives) step by step",
            observed={
                "returncode": outcome.returncode,
                "timed_out": outcome.timed_out,
                "heartbeats": {r: b.to_dict() for r, b in outcome.heartbeats.items()},
                "exit_codes": outcome.exit_codes,
            },
            evidence=_failure_evidence(outcome)[:12],
        )
    ]
    results.extend(diagnose(outcome.logs, outcome.exit_codes))
    return results
