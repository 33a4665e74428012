"""The objects the translators write, as TypedDicts named and spelled as their APIs spell them.

TypedDicts because the shape is the file's: each translator builds plain data and serialize.py dumps it
as YAML last. Only the fields ddp-doctor writes are here. Sources: the Kubernetes API reference
(core/v1 Pod, Service; batch/v1 Job), kubernetes-sigs/jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go,
kubeflow/training-operator pkg/apis/kubeflow.org/v1/pytorch_types.go, kubeflow/trainer v2.3.0
pkg/apis/trainer/v1alpha1 (ClusterTrainingRuntime, TrainJob), and the Compose specification
(compose-spec/compose-spec, services).
"""

from __future__ import annotations

from typing import TypedDict

# ---- core/v1 -------------------------------------------------------------------------------------


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    labels: dict[str, str]


class ObjectFieldSelector(TypedDict):
    fieldPath: str


class EnvVarSource(TypedDict):
    fieldRef: ObjectFieldSelector


class EnvVar(TypedDict, total=False):
    name: str
    value: str
    valueFrom: EnvVarSource


class ContainerPort(TypedDict):
    name: str
    containerPort: int


# "nvidia.com/gpu" is no Python name: the functional form.
ResourceList = TypedDict("ResourceList", {"cpu": str, "memory": str, "nvidia.com/gpu": int}, total=False)


class ResourceRequirements(TypedDict):
    limits: ResourceList
    requests: ResourceList


class VolumeMount(TypedDict, total=False):
    name: str
    mountPath: str
    readOnly: bool


class EmptyDir(TypedDict):
    medium: str
    sizeLimit: str


class HostPath(TypedDict):
    path: str
    type: str


class PersistentVolumeClaimSource(TypedDict):
    claimName: str
    readOnly: bool


class Volume(TypedDict, total=False):
    name: str
    emptyDir: EmptyDir
    hostPath: HostPath
    persistentVolumeClaim: PersistentVolumeClaimSource


class Capabilities(TypedDict):
    drop: list[str]


class SeccompProfile(TypedDict):
    type: str


class SecurityContext(TypedDict, total=False):
    runAsNonRoot: bool
    allowPrivilegeEscalation: bool
    capabilities: Capabilities
    seccompProfile: SeccompProfile


class Container(TypedDict, total=False):
    name: str
    image: str
    command: list[str]
    args: list[str]
    env: list[EnvVar]
    resources: ResourceRequirements
    volumeMounts: list[VolumeMount]
    securityContext: SecurityContext
    ports: list[ContainerPort]
    terminationMessagePolicy: str


class PodSecurityContext(TypedDict, total=False):
    runAsUser: int
    runAsGroup: int
    fsGroup: int
    runAsNonRoot: bool


class PodSpec(TypedDict, total=False):
    restartPolicy: str
    runtimeClassName: str
    subdomain: str
    securityContext: PodSecurityContext
    initContainers: list[Container]
    containers: list[Container]
    volumes: list[Volume]


class PodTemplateJson(TypedDict, total=False):
    metadata: ObjectMeta
    spec: PodSpec


class ServicePort(TypedDict):
    name: str
    port: int
    targetPort: int


class ServiceSpec(TypedDict):
    clusterIP: str
    publishNotReadyAddresses: bool
    selector: dict[str, str]
    ports: list[ServicePort]


class ServiceDocument(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: ServiceSpec


# ---- batch/v1 ------------------------------------------------------------------------------------


class OnExitCodes(TypedDict):
    containerName: str
    operator: str
    values: list[int]


class OnPodCondition(TypedDict):
    type: str
    status: str


class PodFailurePolicyRule(TypedDict, total=False):
    action: str
    onExitCodes: OnExitCodes
    onPodConditions: list[OnPodCondition]


class PodFailurePolicy(TypedDict):
    rules: list[PodFailurePolicyRule]


class JobSpec(TypedDict, total=False):
    backoffLimit: int
    completionMode: str
    completions: int
    parallelism: int
    podFailurePolicy: PodFailurePolicy
    template: PodTemplateJson


class JobDocument(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JobSpec


# ---- JobSet (jobset.x-k8s.io/v1alpha2) -----------------------------------------------------------


class JobSetFailurePolicyRule(TypedDict):
    name: str
    action: str
    onJobFailureReasons: list[str]
    onJobFailureMessagePatterns: list[str]


class JobSetFailurePolicy(TypedDict):
    maxRestarts: int
    rules: list[JobSetFailurePolicyRule]


class JobTemplate(TypedDict, total=False):
    metadata: ObjectMeta
    spec: JobSpec


class ReplicatedJob(TypedDict, total=False):
    name: str
    replicas: int
    template: JobTemplate


class Network(TypedDict):
    enableDNSHostnames: bool
    publishNotReadyAddresses: bool


class JobSetSpec(TypedDict, total=False):
    network: Network
    failurePolicy: JobSetFailurePolicy
    replicatedJobs: list[ReplicatedJob]


class JobSetDocument(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: JobSetSpec


# ---- PyTorchJob (kubeflow.org/v1) ----------------------------------------------------------------


class ReplicaSpec(TypedDict):
    replicas: int
    restartPolicy: str
    template: PodTemplateJson


class ElasticPolicy(TypedDict):
    rdzvBackend: str
    rdzvPort: int
    minReplicas: int
    maxReplicas: int
    maxRestarts: int


class RunPolicy(TypedDict):
    cleanPodPolicy: str
    backoffLimit: int


class PyTorchJobSpec(TypedDict, total=False):
    nprocPerNode: str
    elasticPolicy: ElasticPolicy
    pytorchReplicaSpecs: dict[str, ReplicaSpec]
    """Master and Worker."""
    runPolicy: RunPolicy


class PyTorchJobDocument(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PyTorchJobSpec


# ---- Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1) -----------------------------------------


class TorchPolicy(TypedDict, total=False):
    """Written empty: the torch plugin's defaults."""


class MLPolicy(TypedDict):
    numNodes: int
    torch: TorchPolicy


class JobSetTemplate(TypedDict):
    spec: JobSetSpec


class RuntimeSpec(TypedDict):
    mlPolicy: MLPolicy
    template: JobSetTemplate


class RuntimeDocument(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: RuntimeSpec


class RuntimeRef(TypedDict):
    name: str
    apiGroup: str
    kind: str


class Trainer(TypedDict):
    image: str
    command: list[str]
    args: list[str]
    numNodes: int
    numProcPerNode: int
    resourcesPerNode: ResourceRequirements
    env: list[EnvVar]


class TrainJobSpec(TypedDict):
    runtimeRef: RuntimeRef
    trainer: Trainer


class TrainJobDocument(TypedDict):
    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: TrainJobSpec


# ---- Compose -------------------------------------------------------------------------------------


class ComposeDevice(TypedDict, total=False):
    driver: str
    capabilities: list[str]
    count: int | str
    """A number of GPUs, or "all"."""
    device_ids: list[str]


class ComposeReservations(TypedDict):
    devices: list[ComposeDevice]


class ComposeLimits(TypedDict):
    cpus: str
    memory: str


class ComposeResources(TypedDict, total=False):
    limits: ComposeLimits
    reservations: ComposeReservations


class ComposeDeploy(TypedDict):
    resources: ComposeResources


class Ulimits(TypedDict):
    memlock: int
    stack: int


class DependsOn(TypedDict):
    condition: str


class ComposeService(TypedDict, total=False):
    image: str
    command: list[str]
    user: str
    ipc: str
    shm_size: str
    ulimits: Ulimits
    network_mode: str
    environment: dict[str, str]
    volumes: list[str]
    deploy: ComposeDeploy
    depends_on: dict[str, DependsOn]


class ComposeFile(TypedDict):
    name: str
    services: dict[str, ComposeService]
