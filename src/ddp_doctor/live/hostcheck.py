"""What `check` judges about this host, built once, and its report, assembled in one place.

The subject is one record: this host's static facts (env.facts.gather), what the ranks reported
(their torch facts: the parent never imports torch, rank 0 did), the live run's facts, and the
settings of check the units read (--expect-gpus). `host_facts` builds it once, `judge` evaluates
the units over it once, and `assemble` is the only place a check report gets its facts, results
and root cause, from `check --static` and from the live chain alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ddp_doctor.checkconfig import CheckConfig
from ddp_doctor.env import checks
from ddp_doctor.report import Report, Result, Status


def host_facts(
    static: Mapping[str, Any] | None,
    config: CheckConfig,
    *,
    ranks_torch: Mapping[str, Any] | None = None,
    live: Mapping[str, Any] | None = None,
    gpu_baseline: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The recorded facts the units judge (and the report carries): `static` as gathered, the torch
    facts rank 0 reported over the file-based ones, the live run, the GPUs' use before it, the config."""
    facts = dict(static or {})
    if ranks_torch:
        facts["torch"] = {**(facts.get("torch") or {}), **ranks_torch, "source": "rank 0"}
    if live is not None:
        facts["live"] = dict(live)
    if gpu_baseline:
        facts["gpu_baseline"] = dict(gpu_baseline)
    facts["expect_gpus"] = config.expect_gpus
    return facts


def judge(facts: Mapping[str, Any], gather_problem: str | None = None) -> list[Result]:
    """Every host unit over `facts`, once; one ERROR instead when the static facts could not be gathered."""
    if gather_problem is not None:
        return [
            Result("env.facts", "static facts", Status.ERROR, f"gathering the static facts failed: {gather_problem}")
        ]
    # Imported here, after torchrun has started: loading the registry before the launch would delay it.

    return checks.evaluate(facts)


def assemble(
    report: Report,
    facts: Mapping[str, Any],
    results: Sequence[Result],
    root_cause: str | None = None,
    headline: str | None = None,
) -> Report:
    """The report's body, set once: the command made its header (what was examined)."""
    report.facts = dict(facts)
    report.results = list(results)
    report.root_cause = root_cause
    if headline is not None:
        report.headline = headline
    return report
