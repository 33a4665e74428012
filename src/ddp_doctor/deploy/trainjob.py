"""LaunchSpec -> a Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1) and the
ClusterTrainingRuntime it references (written here, or an existing one named with --runtime).

The runtime is what the cluster provides: a JobSet template whose replicated Job `node` (labelled as the
trainer step) runs a container named `node` with the pod rules every target shares (/dev/shm, security,
volumes, the preflight init container, the failure policies). The TrainJob is what the user asks: image,
command, nodes, processes per node, resources. The Trainer's torch plugin sets PET_NNODES,
PET_NPROC_PER_NODE, PET_NODE_RANK (the pod's completion index), PET_MASTER_ADDR (NAME-node-0-0.NAME) and
PET_MASTER_PORT (29500) in the `node` container, and copies numNodes into the Job's parallelism and
completions; the command reads them as $(VAR), which Kubernetes expands from the container's environment.
Sources: kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/torch/torch.go, plugins/jobset/builder.go
and jobset.go (SyncParallelCount), pkg/constants/constants.go, manifests/base/runtimes/torch_distributed.yaml.
"""

from __future__ import annotations

from dataclasses import replace

from ddp_doctor.deploy import failurepolicy, jobset, pod
from ddp_doctor.deploy.manifests import (
    EnvVar,
    JobSetSpec,
    JobSetTemplate,
    JobTemplate,
    MLPolicy,
    ObjectMeta,
    ReplicatedJob,
    RuntimeDocument,
    RuntimeRef,
    RuntimeSpec,
    TorchPolicy,
    Trainer,
    TrainJobDocument,
    TrainJobSpec,
)
from ddp_doctor.deploy.serialize import yaml_documents
from ddp_doctor.deploy.spec import LaunchSpec

API_VERSION = "trainer.kubeflow.org/v1alpha1"
GROUP = "trainer.kubeflow.org"
CONTAINER = "node"
"""The Trainer puts the TrainJob's image, command and environment into the container of this name."""
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
RESERVED_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
"""The torch plugin sets these and its webhook refuses a TrainJob whose trainer.env names one
(constants.TorchRunReservedEnvNames)."""
TRAINER_PORT = 29500
"""PET_MASTER_PORT: the Trainer's fixed port for the trainer nodes (constants.ContainerTrainerPort)."""


def _spec(spec: LaunchSpec) -> LaunchSpec:
    # The rendezvous is on the Trainer's port, whatever --rdzv-port says; the watching doctors gather beside it.
    return replace(spec, rdzv_port=TRAINER_PORT)


def runtime_name(spec: LaunchSpec) -> str:
    return spec.runtime or spec.name


def command(spec: LaunchSpec) -> list[str]:
    spec = _spec(spec)
    return spec.entrypoint(
        node_rank="$(PET_NODE_RANK)",
        rdzv_host="$(PET_MASTER_ADDR)",
        rdzv_id=spec.name,
        rdzv_port="$(PET_MASTER_PORT)",
        gather_host="$(PET_MASTER_ADDR)",
    )


def runtime(spec: LaunchSpec) -> RuntimeDocument:
    spec = _spec(spec)
    words = command(spec)
    job = jobset.job_template(spec, words, CONTAINER, env=[])
    body = JobSetSpec()
    policy = failurepolicy.jobset_failure_policy(spec, CONTAINER)
    if policy:
        body["failurePolicy"] = policy
    template = JobTemplate(metadata=ObjectMeta(labels={ANCESTOR_LABEL: "trainer"}), spec=job)
    body["replicatedJobs"] = [ReplicatedJob(name=jobset.REPLICATED_JOB, template=template)]
    meta = pod.metadata(spec)
    meta.pop("namespace", None)  # a ClusterTrainingRuntime belongs to the cluster, not a namespace
    meta["labels"]["trainer.kubeflow.org/framework"] = "torch"
    return RuntimeDocument(
        apiVersion=API_VERSION,
        kind="ClusterTrainingRuntime",
        metadata=meta,
        spec=RuntimeSpec(
            mlPolicy=MLPolicy(numNodes=spec.nodes, torch=TorchPolicy()), template=JobSetTemplate(spec=body)
        ),
    )


def train_job(spec: LaunchSpec) -> TrainJobDocument:
    words = [pod.literal(w) for w in command(spec)]
    trainer = Trainer(
        image=spec.image,
        command=words[:1],
        args=words[1:],
        numNodes=spec.nodes,
        numProcPerNode=spec.ranks_per_node,
        resourcesPerNode=pod.resources(spec),
        env=[EnvVar(name=k, value=pod.literal(v)) for k, v in spec.env],
    )
    return TrainJobDocument(
        apiVersion=API_VERSION,
        kind="TrainJob",
        metadata=pod.metadata(spec),
        spec=TrainJobSpec(
            runtimeRef=RuntimeRef(name=runtime_name(spec), apiGroup=GROUP, kind="ClusterTrainingRuntime"),
            trainer=trainer,
        ),
    )


def documents(spec: LaunchSpec) -> list[RuntimeDocument | TrainJobDocument]:
    return [train_job(spec)] if spec.runtime else [runtime(spec), train_job(spec)]


def render(spec: LaunchSpec) -> str:
    lines = [f"ddp-doctor launch --target trainjob: {spec.shape}", spec.image_needs]
    if spec.runtime:
        lines.append(
            f"Needs Kubeflow Trainer v2 ({API_VERSION}) and the ClusterTrainingRuntime {spec.runtime}, a torch runtime "
            f"whose trainer container is named {CONTAINER}: /dev/shm, security and volumes are that runtime's."
        )
    else:
        lines += [
            (
                f"Needs Kubeflow Trainer v2 ({API_VERSION}). The ClusterTrainingRuntime {spec.name} (cluster-wide: "
                "a cluster admin applies it once) holds the pod rules; the TrainJob names it."
            ),
            "/dev/shm: a memory-backed emptyDir; the memory limit includes its sizeLimit.",
            f"runtimeClassName {pod.RUNTIME_CLASS}: the GPU Operator's RuntimeClass; drop it where NVIDIA is the default runtime.",
            *failurepolicy.header_lines(spec, jobset=True),
        ]
    lines.append(f"The rendezvous is the Trainer's: $(PET_MASTER_ADDR):$(PET_MASTER_PORT), port {TRAINER_PORT}.")
    if not spec.runtime and not spec.log_mount(kubernetes=True).source.startswith("/"):
        lines.append(
            f"Create the PersistentVolumeClaim {spec.log_mount(kubernetes=True).claim} first (logs, checkpoints)."
        )
    return yaml_documents(documents(spec), "\n".join(lines))
