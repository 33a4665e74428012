"""LaunchSpec -> a Kubernetes batch/v1 Job (plus a headless Service for several nodes).

Several nodes use an Indexed Job: pod i gets completion index i (its node rank) and the
stable hostname NAME-i under the headless Service, so node 0 is NAME-0.NAME.
"""

from __future__ import annotations

from ddp_doctor.deploy import failurepolicy, pod
from ddp_doctor.deploy.manifests import (
    ContainerPort,
    EnvVar,
    EnvVarSource,
    JobDocument,
    JobSpec,
    ObjectFieldSelector,
    ObjectMeta,
    PodTemplateJson,
    ServiceDocument,
    ServicePort,
    ServiceSpec,
)
from ddp_doctor.deploy.serialize import yaml_documents
from ddp_doctor.deploy.spec import LaunchSpec

INDEX_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def service(spec: LaunchSpec) -> ServiceDocument:
    return ServiceDocument(
        apiVersion="v1",
        kind="Service",
        metadata=pod.metadata(spec),
        spec=ServiceSpec(
            clusterIP="None",
            # Node 0 must resolve before any readiness: the other nodes dial it at start-up.
            publishNotReadyAddresses=True,
            selector={"batch.kubernetes.io/job-name": spec.name},
            ports=[ServicePort(name="rendezvous", port=spec.rdzv_port, targetPort=spec.rdzv_port)],
        ),
    )


def node_rank_env() -> EnvVar:
    """NODE_RANK from the pod's Job completion index."""
    return EnvVar(name="NODE_RANK", valueFrom=EnvVarSource(fieldRef=ObjectFieldSelector(fieldPath=INDEX_ANNOTATION)))


def job(spec: LaunchSpec) -> JobDocument:
    env: list[EnvVar] = []
    ports: list[ContainerPort] = []
    if spec.multi_node:
        env = [node_rank_env()]
        ports = [ContainerPort(name="rendezvous", containerPort=spec.rdzv_port)]
    node0 = f"{spec.name}-0.{spec.name}"
    command = spec.entrypoint(node_rank="$(NODE_RANK)", rdzv_host=node0, rdzv_id=spec.name, gather_host=node0)
    template_spec = pod.pod_spec(spec, command, env=env, ports=ports, subdomain=spec.name if spec.multi_node else None)
    job_spec = JobSpec(backoffLimit=failurepolicy.WATCH_BACKOFF if spec.watch else 0)
    if spec.multi_node:
        job_spec.update(JobSpec(completionMode="Indexed", completions=spec.nodes, parallelism=spec.nodes))
    policy = failurepolicy.pod_failure_policy(spec, pod.CONTAINER, in_jobset=False)
    if policy:
        job_spec["podFailurePolicy"] = policy
    job_spec["template"] = PodTemplateJson(
        metadata=ObjectMeta(labels={"app.kubernetes.io/name": spec.name}), spec=template_spec
    )
    return JobDocument(apiVersion="batch/v1", kind="Job", metadata=pod.metadata(spec), spec=job_spec)


def documents(spec: LaunchSpec) -> list[ServiceDocument | JobDocument]:
    return [service(spec), job(spec)] if spec.multi_node else [job(spec)]


def render(spec: LaunchSpec) -> str:
    header = (
        f"ddp-doctor launch --target k8s: {spec.shape}\n"
        f"{spec.image_needs}\n"
        "/dev/shm: a memory-backed emptyDir; the memory limit includes its sizeLimit.\n"
        f"runtimeClassName {pod.RUNTIME_CLASS}: the GPU Operator's RuntimeClass; drop it where there is none\n"
        "and NVIDIA is the nodes' default runtime."
    )
    header += "".join("\n" + line for line in failurepolicy.header_lines(spec, jobset=False))
    if not spec.log_mount(kubernetes=True).source.startswith("/"):
        header += (
            f"\nCreate the PersistentVolumeClaim {spec.log_mount(kubernetes=True).claim} first (logs, checkpoints)."
        )
    return yaml_documents(documents(spec), header)
