"""Kubernetes manifests (multi-document) -> one Unit per container of every pod template."""

from __future__ import annotations

from typing import Any

from ddp_doctor.deploy.lint.commandline import launches
from ddp_doctor.deploy.lint.loader import YList, YMap
from ddp_doctor.deploy.lint.model import At, Unit
from ddp_doctor.deploy.lint.quantity import k8s_bytes
from ddp_doctor.deploy.lint.shellparse import Word

# kind -> path to its pod spec
POD_PATHS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Job": ("spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
# Kinds without containers: nothing to check, nothing to report.
PASSIVE = {
    "Service",
    "ConfigMap",
    "Secret",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "Namespace",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Ingress",
    "NetworkPolicy",
    "StorageClass",
    "RuntimeClass",
    "PriorityClass",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "LimitRange",
    "ResourceQuota",
    "CustomResourceDefinition",
    "Endpoints",
    "List",
}
GPU_KEYS = ("nvidia.com/gpu", "amd.com/gpu")
EPHEMERAL = {"emptyDir", "configMap", "secret", "downwardAPI", "projected", "ephemeral"}
MAX_SEARCH = 5000
PYTORCHJOB_CONTAINER = "pytorch"
"""The training operator rejects a replica without a container of this name (DefaultContainerName)."""


def _get(node: Any, *path: Any) -> Any:
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def _map(node: Any, key: str) -> YMap:
    """node[key] when it is a mapping, else an empty one (absent and malformed read the same)."""
    value = node.get(key) if isinstance(node, dict) else None
    if isinstance(value, YMap):
        return value
    empty = YMap()
    empty.line, empty.key_lines, empty.value_lines = getattr(node, "line", 1), {}, {}
    return empty


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _words(c: YMap) -> list[Word]:
    words: list[Word] = []
    for key in ("command", "args"):
        items = c.get(key)
        if isinstance(items, YList):
            words += [Word(str(v), items.line_of(i)) for i, v in enumerate(items) if isinstance(v, (str, int, float))]
    return words


def _find_pod_specs(node: Any, budget: list[int]) -> list[YMap]:
    """For kinds we do not know (MPIJob, JobSet, TrainJob...): any mapping with a containers list."""
    budget[0] -= 1
    if budget[0] < 0:
        return []
    if isinstance(node, YMap):
        if isinstance(node.get("containers"), YList):
            return [node]
        return [p for v in node.values() for p in _find_pod_specs(v, budget)]
    if isinstance(node, YList):
        return [p for v in node for p in _find_pod_specs(v, budget)]
    return []


def workloads(doc: YMap) -> list[tuple[str, YMap, At[int] | None, At[str] | None, bool]]:
    """(label, pod spec, nodes, declared nproc, is-training-operator) for each pod template of one object."""
    kind, name = doc.get("kind"), _get(doc, "metadata", "name") or "?"
    label = f"{kind}/{name}"
    if kind == "PyTorchJob":
        spec = _map(doc, "spec")
        replicas = spec.get("pytorchReplicaSpecs")
        if not isinstance(replicas, YMap):
            return []
        total = sum(_int(_get(r, "replicas")) or 1 for r in replicas.values() if isinstance(r, dict))
        job_nodes = At(total, replicas.line)
        nproc: At[str] | None = None
        elastic = _map(spec, "elasticPolicy")
        if spec.get("nprocPerNode") is not None:
            nproc = At(str(spec["nprocPerNode"]), spec.line_of("nprocPerNode"))
        elif elastic.get("nProcPerNode") is not None:
            nproc = At(str(elastic["nProcPerNode"]), elastic.line_of("nProcPerNode"))
        out: list[tuple[str, YMap, At[int] | None, At[str] | None, bool]] = []
        for rtype, r in replicas.items():
            pod = _get(r, "template", "spec")
            if isinstance(pod, YMap):
                out.append((f"{label} {rtype}", pod, job_nodes, nproc, True))
        return out
    path = POD_PATHS.get(str(kind))
    if path is not None:
        pod = _get(doc, *path)
        if not isinstance(pod, YMap):
            return []
        nodes: At[int] | None = None
        top = _map(doc, "spec")
        count_key = {"Job": "completions", "StatefulSet": "replicas"}.get(str(kind))
        indexed = kind != "Job" or top.get("completionMode") == "Indexed"
        if count_key and indexed:
            n = _int(top.get(count_key))
            nodes = At(n, top.line_of(count_key)) if n else None
        return [(label, pod, nodes, None, False)]
    return [(label, pod, None, None, False) for pod in _find_pod_specs(doc, [MAX_SEARCH])]


def units(doc: YMap, source: str) -> list[Unit]:
    out: list[Unit] = []
    for label, pod, nodes, nproc, operator in workloads(doc):
        volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, YMap)}
        containers = pod.get("containers")
        if not isinstance(containers, YList):
            continue
        found = [
            _container(c, containers.line_of(i), pod, volumes, label, nodes, nproc, operator, source)
            for i, c in enumerate(containers)
            if isinstance(c, YMap)
        ]
        names = [c.get("name") for c in containers if isinstance(c, YMap)]
        if doc.get("kind") == "PyTorchJob" and PYTORCHJOB_CONTAINER not in names and found:
            found[0].structural.append(At("pytorchjob_container_name", containers.line))
        out += found
    return out


def _container(
    c: YMap,
    line: int,
    pod: YMap,
    volumes: dict[Any, YMap],
    label: str,
    nodes: At[int] | None,
    nproc: At[str] | None,
    operator: bool,
    source: str,
) -> Unit:
    u = Unit("k8s", source, f"{label} container {c.get('name', '?')}", line, nodes=nodes)
    if isinstance(c.get("image"), str):
        u.image = At(c["image"], c.line_of("image"))
    env_list = c.get("env")
    for item in env_list if isinstance(env_list, YList) else []:
        if isinstance(item, YMap) and isinstance(item.get("name"), str) and item.get("value") is not None:
            u.env[item["name"]] = At(str(item["value"]), item.line_of("value"))
    u.launches = launches(_words(c))
    u.nproc_declared = nproc or u.env.get("PET_NPROC_PER_NODE")
    u.trains = operator or bool(u.launches)

    resources = _map(c, "resources")
    limits, requests = _map(resources, "limits"), _map(resources, "requests")
    for key in GPU_KEYS:
        if key in limits:
            u.gpus = At(_int(limits[key]), limits.line_of(key))
        if key in requests and _int(requests[key]) is not None:
            u.gpu_request = At(_int(requests[key]) or 0, requests.line_of(key))
    if "memory" in limits and k8s_bytes(limits["memory"]) is not None:
        u.memory_limit = At(k8s_bytes(limits["memory"]) or 0, limits.line_of("memory"))

    _shm(u, c, pod, volumes, line)
    if isinstance(pod.get("runtimeClassName"), str):
        u.runtime_class = At(pod["runtimeClassName"], pod.line_of("runtimeClassName"))
    u.runtime_class_applies = u.gpus is not None
    _security(u, c, pod, line)
    if pod.get("hostNetwork") is True:
        u.host_network = At(True, pod.line_of("hostNetwork"))
    if pod.get("hostIPC") is True:
        u.host_ipc = At(True, pod.line_of("hostIPC"))

    mounts = c.get("volumeMounts")
    persistent = False
    for m in mounts if isinstance(mounts, YList) else []:
        if not isinstance(m, YMap) or m.get("mountPath") == "/dev/shm":
            continue
        vol = volumes.get(m.get("name"))
        if vol is not None and not (set(vol) & EPHEMERAL):
            persistent = True
    u.persistent_volume = persistent
    return u


def _shm(u: Unit, c: YMap, pod: YMap, volumes: dict[Any, YMap], line: int) -> None:
    mounts = c.get("volumeMounts")
    for m in mounts if isinstance(mounts, YList) else []:
        if isinstance(m, YMap) and m.get("mountPath") == "/dev/shm":
            vol = volumes.get(m.get("name"))
            where = m.line_of("mountPath")
            empty = vol.get("emptyDir") if vol is not None else None
            if isinstance(empty, YMap) and empty.get("medium") == "Memory":
                size = k8s_bytes(empty.get("sizeLimit")) if empty.get("sizeLimit") is not None else None
                u.shm_bytes = size
                at = empty.line_of("sizeLimit") if size is not None else empty.line_of("medium")
                u.shm = At("tiny" if size is not None and size < 2**30 else "memory", at)
            elif vol is not None and _get(vol, "hostPath", "path") == "/dev/shm":
                u.shm = At("host", vol.line_of("hostPath"))
            else:
                u.shm = At("disk", vol.line if isinstance(vol, YMap) else where)
            return
    if pod.get("hostIPC") is True:
        u.shm = At("host", pod.line_of("hostIPC"))
    else:
        u.shm = At("default", line)


def _security(u: Unit, c: YMap, pod: YMap, line: int) -> None:
    pod_sc, c_sc = _map(pod, "securityContext"), _map(c, "securityContext")
    user = c_sc.get("runAsUser", pod_sc.get("runAsUser"))
    non_root = c_sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
    if user == 0:
        sc = c_sc if "runAsUser" in c_sc else pod_sc
        u.root = At("runAsUser: 0", sc.line_of("runAsUser"))
    elif non_root is not True and not (isinstance(user, int) and user > 0):
        u.root = At(
            "neither runAsNonRoot: true nor a non-zero runAsUser; the image's USER decides (root for most)", line
        )
    if c_sc.get("privileged") is True:
        u.privileged = At(True, c_sc.line_of("privileged"))
    add = _get(c_sc, "capabilities", "add")
    if isinstance(add, YList):
        for i, cap in enumerate(add):
            if str(cap).upper() in ("IPC_LOCK", "CAP_IPC_LOCK"):
                u.ipc_lock = At(True, add.line_of(i))
