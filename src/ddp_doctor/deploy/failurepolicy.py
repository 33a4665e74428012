"""What Kubernetes does when a pod fails, from the exit codes of the verdict (knowledge/exitcodes.yaml).

A job that runs under `ddp-doctor run --exit-code verdict` (launch --watch) ends with 1 for its own bug,
10 for a hang and 11 for a node or network fault; the preflight init container with the check's status.
A batch/v1 Job acts on each code directly (podFailurePolicy: FailJob, Count, Ignore). A JobSet restarts or
fails the whole set, so its child Job fails at once on every code (FailJob, whose condition message names
the container and the exit code) and the JobSet's failurePolicy picks the action from that message.
Sources: kubernetes pkg/controller/job/pod_failure_policy.go (the message "Container %s for pod %s/%s
failed with exit code %v matching %v rule at index %d"); kubernetes-sigs/jobset v0.12.0
api/jobset/v1alpha2/jobset_types.go (FailurePolicyRule, onJobFailureMessagePatterns: RE2).
"""

from __future__ import annotations

from ddp_doctor.deploy.manifests import (
    JobSetFailurePolicy,
    JobSetFailurePolicyRule,
    OnExitCodes,
    OnPodCondition,
    PodFailurePolicy,
    PodFailurePolicyRule,
)
from ddp_doctor.deploy.pod import PREFLIGHT
from ddp_doctor.deploy.spec import PREFLIGHT_S, LaunchSpec
from ddp_doctor.knowledge import exitcodes

# The Job condition's reason when a podFailurePolicy FailJob rule matched (batch/v1 JobReasonPodFailurePolicy).
POD_FAILURE_POLICY = "PodFailurePolicy"
JOBSET_RESTARTS = 2
"""A hang retried once and a node or network fault requeued; a third failure is read in the report."""
WATCH_BACKOFF = 1
"""A batch Job's retries under --watch: Count spends them (a hang, once); Ignore (infrastructure) does not."""


def _on_exit(container: str, operator: str, codes: list[int]) -> OnExitCodes:
    return OnExitCodes(containerName=container, operator=operator, values=codes)


def pod_failure_policy(spec: LaunchSpec, container: str, in_jobset: bool) -> PodFailurePolicy | None:
    """A Job's podFailurePolicy, or None when the job neither has a preflight nor runs under the doctor."""
    rules: list[PodFailurePolicyRule] = []
    if spec.preflight:
        # A node that fails the check fails the same way on a retry: the job ends with the check's status.
        rules.append(PodFailurePolicyRule(action="FailJob", onExitCodes=_on_exit(PREFLIGHT, "NotIn", [0])))
    if spec.watch:
        for act in exitcodes.actions():
            rules.append(
                PodFailurePolicyRule(
                    action="FailJob" if in_jobset else act.job, onExitCodes=_on_exit(container, "In", [act.code])
                )
            )
        if not in_jobset:
            # Preemption, eviction or a drained node: the pod is replaced without spending a retry.
            disrupted = OnPodCondition(type="DisruptionTarget", status="True")
            rules.append(PodFailurePolicyRule(action="Ignore", onPodConditions=[disrupted]))
    return PodFailurePolicy(rules=rules) if rules else None


def _message(container: str, code: str) -> str:
    return rf"^Container {container} for pod \S+ failed with exit code {code} matching FailJob rule"


def jobset_failure_policy(spec: LaunchSpec, container: str) -> JobSetFailurePolicy | None:
    """The JobSet's failurePolicy (also a TrainJob runtime's) under --watch, or None: then any failed Job fails
    the set (a failed preflight too, with its podFailurePolicy's message)."""
    if not spec.watch:
        return None
    rules: list[JobSetFailurePolicyRule] = []
    if spec.preflight:
        rules.append(
            JobSetFailurePolicyRule(
                name="preflight",
                action="FailJobSet",
                onJobFailureReasons=[POD_FAILURE_POLICY],
                onJobFailureMessagePatterns=[_message(PREFLIGHT, r"\d+")],
            )
        )
    for act in exitcodes.actions():
        rules.append(
            JobSetFailurePolicyRule(
                name=act.kind,
                action=act.jobset,
                onJobFailureReasons=[POD_FAILURE_POLICY],
                onJobFailureMessagePatterns=[_message(container, str(act.code))],
            )
        )
    # Any other failure (an exit status the doctor does not give, an OOM kill) restarts the set, as by default.
    return JobSetFailurePolicy(maxRestarts=JOBSET_RESTARTS, rules=rules)


def header_lines(spec: LaunchSpec, jobset: bool) -> list[str]:
    """What a generated Kubernetes file says about its preflight and its failure policy."""
    lines = []
    if spec.preflight:
        lines.append(
            f"Preflight: the init container {PREFLIGHT} runs {' '.join(spec.preflight_command())} (at most "
            f"{PREFLIGHT_S} s, coreutils timeout); a failure ends the job with its exit status, its report's end in "
            "the pod's termination message."
        )
    if spec.watch:
        codes = ", ".join(f"{a.code} {a.kind} -> {a.jobset if jobset else a.job}" for a in exitcodes.actions())
        lines.append(f"The script runs under ddp-doctor run --exit-code verdict: {codes}.")
    return lines
