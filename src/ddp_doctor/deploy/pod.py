"""The pod template shared by the Kubernetes targets (Job, PyTorchJob, JobSet, the TrainJob's runtime): GPUs,
/dev/shm, security, volumes, and the preflight init container."""

from __future__ import annotations

from typing import Final

from ddp_doctor.deploy.manifests import (
    Capabilities,
    Container,
    ContainerPort,
    EmptyDir,
    EnvVar,
    HostPath,
    ObjectMeta,
    PersistentVolumeClaimSource,
    PodSecurityContext,
    PodSpec,
    ResourceList,
    ResourceRequirements,
    SeccompProfile,
    SecurityContext,
    Volume,
    VolumeMount,
)
from ddp_doctor.deploy.serialize import Expand
from ddp_doctor.deploy.spec import PREFLIGHT_S, LaunchSpec, Mount, gib_text

GPU_RESOURCE: Final = "nvidia.com/gpu"
RUNTIME_CLASS = "nvidia"
CONTAINER = "trainer"
PREFLIGHT = "preflight"
"""The init container that runs `ddp-doctor check` before the job's own container starts."""


def _volume(m: Mount) -> Volume:
    if m.claim:
        return Volume(
            name=m.name, persistentVolumeClaim=PersistentVolumeClaimSource(claimName=m.claim, readOnly=m.read_only)
        )
    return Volume(name=m.name, hostPath=HostPath(path=m.source, type="DirectoryOrCreate"))


def resources(spec: LaunchSpec) -> ResourceRequirements:
    # A memory-backed emptyDir is charged to the container's memory: raise the limit by the
    # shm size, or the pod is OOM-killed when /dev/shm fills up.
    amounts = ResourceList(cpu=str(spec.cpu_count), memory=gib_text(spec.memory + spec.shm, "k8s"))
    if spec.gpus_per_node:
        amounts[GPU_RESOURCE] = spec.gpus_per_node
    # requests == limits: GPUs demand it, and Guaranteed QoS keeps the ranks from being evicted first.
    return ResourceRequirements(limits=amounts.copy(), requests=amounts.copy())


def literal(word: str) -> str:
    """Kubernetes expands $(VAR) in command, args and env values; `$$(` keeps the user's text as is."""
    return str(word) if isinstance(word, Expand) else word.replace("$(", "$$(")


def _mount(m: Mount) -> VolumeMount:
    mount = VolumeMount(name=m.name, mountPath=m.target)
    if m.read_only:
        mount["readOnly"] = True
    return mount


def container(
    spec: LaunchSpec, command: list[str], env: list[EnvVar], ports: list[ContainerPort], name: str = CONTAINER
) -> Container:
    mounts = [VolumeMount(name="dshm", mountPath="/dev/shm")]
    mounts += [_mount(m) for m in (*spec.data, spec.log_mount(kubernetes=True))]
    words = [literal(w) for w in command]
    security = SecurityContext() if spec.uid == 0 else SecurityContext(runAsNonRoot=True)
    security.update(
        SecurityContext(
            allowPrivilegeEscalation=False,
            capabilities=Capabilities(drop=["ALL"]),
            seccompProfile=SeccompProfile(type="RuntimeDefault"),
        )
    )
    c = Container(
        name=name,
        image=spec.image,
        command=words[:1],
        args=words[1:],
        env=[EnvVar(name=k, value=literal(v)) for k, v in spec.env] + env,
        resources=resources(spec),
        volumeMounts=mounts,
        securityContext=security,
    )
    if ports:
        c["ports"] = ports
    return c


def preflight(spec: LaunchSpec, env: list[EnvVar]) -> Container:
    """`ddp-doctor check` in the job's own image, with its GPUs, /dev/shm and environment, before it starts.

    A failing check fails the pod with the check's exit status (1 a failure, 124 out of time: coreutils'
    `timeout` bounds it, the kubelet has no deadline per init container); FallbackToLogsOnError puts the
    end of its report, where the verdict and root cause are, in the pod's status as the termination
    message (`kubectl describe`). The device plugin hands the init container's GPUs on to the job's."""
    bound = ["timeout", "-k", "5", str(PREFLIGHT_S - 5)]
    c = container(spec, [*bound, *spec.preflight_command()], env, [], PREFLIGHT)
    c["terminationMessagePolicy"] = "FallbackToLogsOnError"
    return c


def pod_spec(
    spec: LaunchSpec,
    command: list[str],
    env: list[EnvVar] | None = None,
    ports: list[ContainerPort] | None = None,
    restart: str | None = "Never",
    subdomain: str | None = None,
    container_name: str = CONTAINER,
) -> PodSpec:
    volumes = [Volume(name="dshm", emptyDir=EmptyDir(medium="Memory", sizeLimit=gib_text(spec.shm, "k8s")))]
    volumes += [_volume(m) for m in (*spec.data, spec.log_mount(kubernetes=True))]
    pod = PodSpec()
    if restart:
        pod["restartPolicy"] = restart
    if spec.gpus_per_node:
        # Harmless where nvidia is the default runtime (the toolkit's default), needed where it is not.
        pod["runtimeClassName"] = RUNTIME_CLASS
    if subdomain:
        pod["subdomain"] = subdomain
    # runAsNonRoot beside runAsUser 0 is a pod the kubelet refuses to start: it is written only for a non-root uid.
    pod["securityContext"] = PodSecurityContext(runAsUser=spec.uid, runAsGroup=spec.gid, fsGroup=spec.gid)
    if spec.uid != 0:
        pod["securityContext"]["runAsNonRoot"] = True
    if spec.preflight:
        pod["initContainers"] = [preflight(spec, env or [])]
    pod["containers"] = [container(spec, command, env or [], ports or [], container_name)]
    pod["volumes"] = volumes
    return pod


def metadata(spec: LaunchSpec) -> ObjectMeta:
    meta = ObjectMeta(
        name=spec.name, labels={"app.kubernetes.io/name": spec.name, "app.kubernetes.io/managed-by": "ddp-doctor"}
    )
    if spec.namespace:
        meta["namespace"] = spec.namespace
    return meta
