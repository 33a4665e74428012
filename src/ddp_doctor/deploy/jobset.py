"""LaunchSpec -> a JobSet (jobset.x-k8s.io/v1alpha2): one replicated Job of N indexed pods, one per node.

JobSet gives every pod a stable hostname under a headless Service it creates (network.enableDNSHostnames):
JOBSET-REPLICATEDJOB-JOBINDEX-PODINDEX.SUBDOMAIN, the subdomain defaulting to the JobSet's name, so node 0
is NAME-node-0-0.NAME; pod i's node rank is its Job completion index. publishNotReadyAddresses lets the
other nodes resolve node 0 before any readiness. Sources: kubernetes-sigs/jobset v0.12.0
api/jobset/v1alpha2/jobset_types.go (Network) and pkg/controllers/jobset_controller.go; Kubeflow Trainer
builds the same name for its master (kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/torch/torch.go).
"""

from __future__ import annotations

from ddp_doctor.deploy import failurepolicy, pod
from ddp_doctor.deploy.k8s import node_rank_env
from ddp_doctor.deploy.manifests import (
    ContainerPort,
    EnvVar,
    JobSetDocument,
    JobSetSpec,
    JobSpec,
    JobTemplate,
    Network,
    ObjectMeta,
    PodTemplateJson,
    ReplicatedJob,
)
from ddp_doctor.deploy.serialize import yaml_documents
from ddp_doctor.deploy.spec import LaunchSpec

API_VERSION = "jobset.x-k8s.io/v1alpha2"
REPLICATED_JOB = "node"


def node0(spec: LaunchSpec) -> str:
    return f"{spec.name}-{REPLICATED_JOB}-0-0.{spec.name}"


def job_template(spec: LaunchSpec, command: list[str], container: str, env: list[EnvVar]) -> JobSpec:
    """The child Job: N indexed pods with no retry of their own (the JobSet restarts the whole set)."""
    ports = [ContainerPort(name="rendezvous", containerPort=spec.rdzv_port)] if spec.multi_node else []
    template_spec = pod.pod_spec(spec, command, env=env, ports=ports, container_name=container)
    job = JobSpec(backoffLimit=0, completionMode="Indexed", completions=spec.nodes, parallelism=spec.nodes)
    policy = failurepolicy.pod_failure_policy(spec, container, in_jobset=True)
    if policy:
        job["podFailurePolicy"] = policy
    job["template"] = PodTemplateJson(
        metadata=ObjectMeta(labels={"app.kubernetes.io/name": spec.name}), spec=template_spec
    )
    return job


def to_dict(spec: LaunchSpec) -> JobSetDocument:
    host = node0(spec)
    command = spec.entrypoint(node_rank="$(NODE_RANK)", rdzv_host=host, rdzv_id=spec.name, gather_host=host)
    body = JobSetSpec(network=Network(enableDNSHostnames=True, publishNotReadyAddresses=True))
    policy = failurepolicy.jobset_failure_policy(spec, pod.CONTAINER)
    if policy:
        body["failurePolicy"] = policy
    template = JobTemplate(spec=job_template(spec, command, pod.CONTAINER, [node_rank_env()]))
    body["replicatedJobs"] = [ReplicatedJob(name=REPLICATED_JOB, replicas=1, template=template)]
    return JobSetDocument(apiVersion=API_VERSION, kind="JobSet", metadata=pod.metadata(spec), spec=body)


def render(spec: LaunchSpec) -> str:
    lines = [
        f"ddp-doctor launch --target jobset: {spec.shape}",
        spec.image_needs,
        f"Needs the JobSet controller ({API_VERSION}). Node 0 is {node0(spec)}; NODE_RANK is the pod's completion index.",
        "/dev/shm: a memory-backed emptyDir; the memory limit includes its sizeLimit.",
        f"runtimeClassName {pod.RUNTIME_CLASS}: the GPU Operator's RuntimeClass; drop it where NVIDIA is the default runtime.",
        *failurepolicy.header_lines(spec, jobset=True),
    ]
    if not spec.log_mount(kubernetes=True).source.startswith("/"):
        lines.append(
            f"Create the PersistentVolumeClaim {spec.log_mount(kubernetes=True).claim} first (logs, checkpoints)."
        )
    return yaml_documents([to_dict(spec)], "\n".join(lines))
