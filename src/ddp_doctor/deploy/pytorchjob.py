"""LaunchSpec -> a Kubeflow PyTorchJob (kubeflow.org/v1): Master + Workers, nprocPerNode = GPU limit.

The training operator requires a container named `pytorch`, reads MASTER_PORT from its port
named `pytorchjob-port`, and, when there is a Master, sets MASTER_ADDR and RANK (the pod's
rank: Master 0, Worker i -> i+1) in every pod; Kubernetes expands $(VAR) in args from the
container's environment. Source: kubeflow/training-operator pkg/controller.v1/pytorch/envvar.go.
Elastic jobs have Workers only and no RANK: torchrun's c10d rendezvous assigns node ranks.
"""

from __future__ import annotations

from ddp_doctor.deploy import pod
from ddp_doctor.deploy.manifests import (
    ContainerPort,
    ElasticPolicy,
    ObjectMeta,
    PodTemplateJson,
    PyTorchJobDocument,
    PyTorchJobSpec,
    ReplicaSpec,
    RunPolicy,
)
from ddp_doctor.deploy.serialize import yaml_documents
from ddp_doctor.deploy.spec import LaunchSpec

PORT_NAME = "pytorchjob-port"
CONTAINER_NAME = "pytorch"
"""The operator validates that each replica has a container of this name and reads the port from it."""


def _replica(spec: LaunchSpec, replicas: int, rdzv_host: str) -> ReplicaSpec:
    command = spec.entrypoint(node_rank="$(RANK)", rdzv_host=rdzv_host, rdzv_id=spec.name)
    ports = [ContainerPort(name=PORT_NAME, containerPort=spec.rdzv_port)]
    template_spec = pod.pod_spec(spec, command, ports=ports, restart=None, container_name=CONTAINER_NAME)
    return ReplicaSpec(
        replicas=replicas,
        restartPolicy="Never",
        template=PodTemplateJson(metadata=ObjectMeta(labels={"app.kubernetes.io/name": spec.name}), spec=template_spec),
    )


def to_dict(spec: LaunchSpec) -> PyTorchJobDocument:
    job_spec = PyTorchJobSpec(nprocPerNode=str(spec.ranks_per_node))
    if spec.min_nodes is not None:
        # Elastic: only Workers, any of which may host the c10d store; worker 0 is the endpoint.
        job_spec["elasticPolicy"] = ElasticPolicy(
            rdzvBackend="c10d",
            rdzvPort=spec.rdzv_port,
            minReplicas=spec.min_nodes,
            maxReplicas=spec.nodes,
            maxRestarts=3,
        )
        job_spec["pytorchReplicaSpecs"] = {"Worker": _replica(spec, spec.nodes, f"{spec.name}-worker-0")}
    else:
        replicas = {"Master": _replica(spec, 1, "$(MASTER_ADDR)")}
        if spec.nodes > 1:
            replicas["Worker"] = _replica(spec, spec.nodes - 1, "$(MASTER_ADDR)")
        job_spec["pytorchReplicaSpecs"] = replicas
    job_spec["runPolicy"] = RunPolicy(cleanPodPolicy="None", backoffLimit=0)
    return PyTorchJobDocument(
        apiVersion="kubeflow.org/v1", kind="PyTorchJob", metadata=pod.metadata(spec), spec=job_spec
    )


def render(spec: LaunchSpec) -> str:
    header = (
        f"ddp-doctor launch --target pytorchjob: {spec.shape}\n"
        f"{spec.image_needs}\n"
        "Needs the Kubeflow training operator (kubeflow.org/v1 PyTorchJob).\n"
        f"nprocPerNode = nvidia.com/gpu limit = {spec.ranks_per_node}; /dev/shm memory-backed, counted in the memory limit."
    )
    return yaml_documents([to_dict(spec)], header)
