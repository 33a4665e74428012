"""Who the training runs as."""

from __future__ import annotations

from ddp_doctor.checks import table
from ddp_doctor.checks.facts.host import UserFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status


def judge(f: UserFacts) -> Finding:
    """Warns when the job runs as root (uid 0, or an image whose User is empty, `root` or `0`).

    Why: root-owned checkpoints on shared storage, and clusters that enforce runAsNonRoot refuse the
    pod. The remedy (Dockerfile USER, securityContext, --user) comes from checks/knowledge.yaml
    (`non_root`), the same words `lint` uses for a config that runs as root.
    """
    if f.root is None:
        return skip(f.unknown_why or "the user is not known here")
    if f.root:
        rule = table.non_root()
        return Finding(
            Status.WARN,
            f"{f.subject} runs as root ({f.how}); expected a non-root user",
            cause=rule.why,
            remedy=rule.remedy(),
            observed=f.observed,
            expected={"user": "non-root"},
        )
    return Finding(Status.PASS, f"{f.subject} runs as {f.how}", observed=f.observed)


CHECK = Check(
    name="user",
    title="user",
    facts=UserFacts,
    judge=judge,
    ids={"env": "env.user", "image": "image.user", "lint": "lint.<area>.run_as_root"},
    order=170,
)
