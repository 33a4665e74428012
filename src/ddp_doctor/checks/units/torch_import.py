"""Does `import torch` work in a fresh interpreter, and if not, which known failure is it?"""

from __future__ import annotations

from ddp_doctor import knowledge
from ddp_doctor.checks.facts.software import TorchFacts
from ddp_doctor.checks.install import install_for
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status


def advice(error: str, f: TorchFacts) -> tuple[str, str]:
    """(cause, remedy) of the first rule in knowledge/import_errors.yaml whose words are in `error`."""
    install = install_for(f.install, f.metadata_version)
    for rule in knowledge.import_errors():
        if any(m in error for m in rule.match):
            return rule.cause, rule.remedy.format(python=f.install.python, install=install)
    return ("torch is installed but raises during import", f"reinstall it: `{install} --force-reinstall`")


def judge(f: TorchFacts) -> Finding:
    """Fails when `import torch` raises in a fresh interpreter of the target environment.

    The cause and remedy come from the first matching entry of knowledge/import_errors.yaml
    (missing libcudart, an undefined symbol from a mixed install, a numpy ABI break, ...), else a
    forced reinstall of the same release. Skipped where the import was not probed (the live chain
    imports torch in every rank instead).
    """
    if not f.installed:
        return skip("torch is not installed (see env.torch.installed)")
    if f.importable is None:
        return skip("import not probed here (the live chain imports torch in every rank)")
    if f.importable:
        secs = f.import_s
        return Finding(
            Status.PASS,
            f"`import torch` works in a fresh interpreter ({secs:.2f} s)" if secs else "`import torch` works",
            metrics={"import_s": float(secs)} if secs else {},
        )
    error = f.import_error or "unknown error"
    cause, remedy = advice(error + "\n" + (f.import_stderr_tail or ""), f)
    first = error.strip().splitlines()[-1] if error.strip() else error
    return Finding(
        Status.FAIL,
        f"`import torch` fails: {first[:300]}; expected it to import",
        cause=cause,
        remedy=remedy,
        observed={"import_error": error[:2000]},
    )


CHECK = Check(
    name="torch.import",
    title="torch imports",
    facts=TorchFacts,
    judge=judge,
    ids={"env": "env.torch.import"},
    order=30,
    tags=frozenset({"environment"}),
)
