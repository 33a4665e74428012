"""LaunchSpec -> a Kubernetes batch/v1 Job (plus a headless Service for several nodes).

Several nodes use an Indexed Job: pod i gets completion index i (its node rank) and the
stable hostname NAME-i under the headless Service, so node 0 is NAME-0.NAME.
"""

from __future__ import annotations

from typing import Any

from ddp_doctor.deploy import failurepolicy, pod
from ddp_doctor.deploy.serialize import yaml_documents
from ddp_doctor.deploy.spec import LaunchSpec

INDEX_ANNOTATION = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def service(spec: LaunchSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": pod.metadata(spec),
        "spec": {
            "clusterIP": "None",
            # Node 0 must resolve before any readiness: the other nodes dial it at start-up.
            "publishNotReadyAddresses": True,
            "selector": {"batch.kubernetes.io/job-name": spec.name},
            "ports": [{"name": "rendezvous", "port": spec.rdzv_port, "targetPort": spec.rdzv_port}],
        },
    }


def job(spec: LaunchSpec) -> dict[str, Any]:
    env: list[dict[str, Any]] = []
    ports: list[dict[str, Any]] = []
    if spec.multi_node:
        env = [{"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": INDEX_ANNOTATION}}}]
        ports = [{"name": "rendezvous", "containerPort": spec.rdzv_port}]
    node0 = f"{spec.name}-0.{spec.name}"
    command = spec.entrypoint(node_rank="$(NODE_RANK)", rdzv_host=node0, rdzv_id=spec.name, gather_host=node0)
    template_spec = pod.pod_spec(spec, command, env=env, ports=ports, subdomain=spec.name if spec.multi_node else None)
    job_spec: dict[str, Any] = {"backoffLimit": failurepolicy.WATCH_BACKOFF if spec.watch else 0}
    if spec.multi_node:
        job_spec.update({"completionMode": "Indexed", "completions": spec.nodes, "parallelism": spec.nodes})
    policy = failurepolicy.pod_failure_policy(spec, pod.CONTAINER, in_jobset=False)
    if policy:
        job_spec["podFailurePolicy"] = policy
    job_spec["template"] = {"metadata": {"labels": {"app.kubernetes.io/name": spec.name}}, "spec": template_spec}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": pod.metadata(spec), "spec": job_spec}


def documents(spec: LaunchSpec) -> list[dict[str, Any]]:
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
