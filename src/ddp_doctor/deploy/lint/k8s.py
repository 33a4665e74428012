"""Kubernetes manifests (multi-document) -> one Unit per container of every pod template."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ddp_doctor.checks import table
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


@dataclass
class PodTemplate:
    """One pod template of an object, with what the object around it says about the job."""

    label: str
    pod: YMap
    nodes: At[int] | None = None
    nodes_what: str = ""
    nproc: At[str] | None = None
    operator: str | None = None
    elastic: At[str] | None = None
    rdzv_names: list[str] = field(default_factory=list)
    template: bool = False
    trains: bool = False
    """The object itself is a training job (a PyTorchJob replica, a TrainJob's trainer)."""


def _nodes(value: Any, line: int, what: str) -> tuple[At[int] | None, str]:
    n = _int(value)
    return (At(n, line), what) if n is not None else (None, "")


def _pytorchjob(doc: YMap, label: str) -> list[PodTemplate]:
    spec = _map(doc, "spec")
    replicas = spec.get("pytorchReplicaSpecs")
    if not isinstance(replicas, YMap):
        return []
    counts = [_get(r, "replicas") for r in replicas.values() if isinstance(r, dict)]
    ints = [1 if c is None else _int(c) for c in counts]
    job_nodes = At(sum(i for i in ints if i is not None), replicas.line) if None not in ints else None
    nproc: At[str] | None = None
    elastic_map = _map(spec, "elasticPolicy")
    elastic = None
    if "elasticPolicy" in spec:
        lo, hi = elastic_map.get("minReplicas"), elastic_map.get("maxReplicas")
        elastic = At(f"{lo if lo is not None else '?'}:{hi if hi is not None else '?'}", spec.line_of("elasticPolicy"))
    if spec.get("nprocPerNode") is not None:
        nproc = At(str(spec["nprocPerNode"]), spec.line_of("nprocPerNode"))
    elif elastic_map.get("nProcPerNode") is not None:
        nproc = At(str(elastic_map["nProcPerNode"]), elastic_map.line_of("nProcPerNode"))
    name = _get(doc, "metadata", "name") or "?"
    out = []
    for rtype, r in replicas.items():
        pod = _get(r, "template", "spec")
        if isinstance(pod, YMap):
            out.append(
                PodTemplate(
                    f"{label} {rtype}",
                    pod,
                    job_nodes,
                    "replicas (all replica types)",
                    nproc,
                    "pytorchjob",
                    elastic,
                    [f"{name}-master-0", f"{name}-worker-0"],
                    trains=True,
                )
            )
    return out


def _jobset_jobs(spec: YMap, js_name: str, label: str, template: bool) -> list[PodTemplate]:
    network = _map(spec, "network")
    subdomain = network.get("subdomain") or js_name
    jobs = spec.get("replicatedJobs")
    out: list[PodTemplate] = []
    for job in jobs if isinstance(jobs, YList) else []:
        if not isinstance(job, YMap):
            continue
        rjob = job.get("name", "?")
        jspec = _map(_map(job, "template"), "spec")
        pod = _get(jspec, "template", "spec")
        if not isinstance(pod, YMap):
            continue
        replicas = _int(job.get("replicas", 1))
        parallelism = _int(jspec.get("parallelism", 1))
        nodes = None
        what = ""
        if replicas is not None and parallelism is not None:
            line = jspec.line_of("parallelism") if "parallelism" in jspec else job.line
            nodes = At(replicas * parallelism, line)
            what = "replicas x parallelism" if replicas != 1 else "parallelism"
        names = [f"{js_name}-{rjob}-0-0.{subdomain}", f"{js_name}-{rjob}-0-0"]
        out.append(
            PodTemplate(f"{label} replicatedJob {rjob}", pod, nodes, what, None, "jobset", None, names, template)
        )
    return out


def _trainer_runtime(doc: YMap, label: str) -> list[PodTemplate]:
    spec = _map(doc, "spec")
    ml = _map(spec, "mlPolicy")
    name = _get(doc, "metadata", "name") or "?"
    out = _jobset_jobs(_map(_map(spec, "template"), "spec"), name, label, template=True)
    torch = ml.get("torch")
    for w in out:
        # The node replicatedJob (trainjob-ancestor-step: trainer) runs the training; its size comes from the TrainJob.
        w.operator = "trainjob" if isinstance(torch, dict) else w.operator
        nodes, what = _nodes(ml.get("numNodes"), ml.line_of("numNodes"), "mlPolicy.numNodes")
        if nodes is not None and "replicatedJob node" in w.label:
            w.nodes, w.nodes_what = nodes, what
        proc = _get(ml, "torch", "numProcPerNode")
        if proc is not None and isinstance(torch, YMap):
            w.nproc = At(str(proc), torch.line_of("numProcPerNode"))
    return out


def _trainjob(doc: YMap, label: str) -> list[PodTemplate]:
    """A TrainJob has no pod template of its own: its trainer (command, image, resourcesPerNode, env,
    numNodes) is checked as the container it becomes; shm and security come from the runtime."""
    spec = _map(doc, "spec")
    trainer = spec.get("trainer")
    if not isinstance(trainer, YMap):
        return []
    name = _get(doc, "metadata", "name") or "?"
    container = YMap(trainer)
    container.line, container.key_lines, container.value_lines = trainer.line, dict(trainer.key_lines), {}
    container["name"] = "trainer"
    if "resourcesPerNode" in trainer:
        container["resources"] = trainer["resourcesPerNode"]
        container.key_lines["resources"] = trainer.line_of("resourcesPerNode")
    pod = YMap({"containers": _ylist([container], trainer.line)})
    pod.line, pod.key_lines, pod.value_lines = trainer.line, {}, {}
    nodes, what = _nodes(trainer.get("numNodes"), trainer.line_of("numNodes"), "trainer.numNodes")
    nproc = (
        At(str(trainer["numProcPerNode"]), trainer.line_of("numProcPerNode")) if "numProcPerNode" in trainer else None
    )
    return [
        PodTemplate(
            f"{label} trainer", pod, nodes, what, nproc, "trainjob", None, [f"{name}-node-0-0.{name}"], trains=True
        )
    ]


def _ylist(items: list[Any], line: int) -> YList:
    out = YList(items)
    out.line, out.item_lines = line, [getattr(i, "line", line) for i in items]
    return out


def _lws(doc: YMap, label: str) -> list[PodTemplate]:
    lwt = _map(_map(doc, "spec"), "leaderWorkerTemplate")
    nodes, what = _nodes(lwt.get("size", 1), lwt.line_of("size"), "leaderWorkerTemplate.size")
    out = []
    for key in ("leaderTemplate", "workerTemplate"):
        pod = _get(lwt, key, "spec")
        if isinstance(pod, YMap):
            out.append(PodTemplate(f"{label} {key}", pod, nodes, what, None, "lws"))
    return out


def pod_templates(doc: YMap) -> list[PodTemplate]:
    """Each pod template of one object, with the job-level facts around it."""
    kind, name = doc.get("kind"), _get(doc, "metadata", "name") or "?"
    label = f"{kind}/{name}"
    if kind == "PyTorchJob":
        return _pytorchjob(doc, label)
    if kind == "JobSet":
        return _jobset_jobs(_map(doc, "spec"), str(name), label, template=False)
    if kind in ("ClusterTrainingRuntime", "TrainingRuntime"):
        return _trainer_runtime(doc, label)
    if kind == "TrainJob":
        return _trainjob(doc, label)
    if kind == "LeaderWorkerSet":
        return _lws(doc, label)
    path = POD_PATHS.get(str(kind))
    if path is not None:
        pod = _get(doc, *path)
        if not isinstance(pod, YMap):
            return []
        top = _map(doc, "spec")
        nodes: At[int] | None = None
        what = ""
        if kind == "StatefulSet":
            nodes, what = _nodes(top.get("replicas", 1), top.line_of("replicas"), "replicas")
        elif kind == "Job":
            key = "parallelism" if "parallelism" in top else "completions"
            nodes, what = _nodes(top.get(key, 1), top.line_of(key), key)
        return [PodTemplate(label, pod, nodes, what)]
    return [PodTemplate(label, pod) for pod in _find_pod_specs(doc, [MAX_SEARCH])]


def units(doc: YMap, source: str) -> list[Unit]:
    out: list[Unit] = []
    for w in pod_templates(doc):
        pod = w.pod
        volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, YMap)}
        containers = pod.get("containers")
        if not isinstance(containers, YList):
            continue
        found = [
            _container(c, containers.line_of(i), pod, volumes, w, source)
            for i, c in enumerate(containers)
            if isinstance(c, YMap)
        ]
        names = [c.get("name") for c in containers if isinstance(c, YMap)]
        if doc.get("kind") == "PyTorchJob" and PYTORCHJOB_CONTAINER not in names and found:
            found[0].structural.append(At("pytorchjob_container_name", containers.line))
        if doc.get("kind") == "TrainJob":
            for u in found:
                u.shm, u.root, u.persistent_volume = None, None, None
        out += found
    launching = [u for u in out if u.launches and u.nodes is not None]
    if doc.get("kind") == "JobSet" and launching:
        seen: dict[str, int] = {u.name.split(" container ")[0]: u.nodes.value for u in launching if u.nodes}
        total = At(sum(seen.values()), launching[0].nodes.line if launching[0].nodes else doc.line)
        for u in out:
            u.nodes_total = total
    return out


def _container(c: YMap, line: int, pod: YMap, volumes: dict[Any, YMap], w: PodTemplate, source: str) -> Unit:
    u = Unit("k8s", source, f"{w.label} container {c.get('name', '?')}", line, nodes=w.nodes)
    u.nodes_what, u.operator, u.elastic, u.rdzv_names, u.template = (
        w.nodes_what,
        w.operator,
        w.elastic,
        w.rdzv_names,
        w.template,
    )
    if isinstance(c.get("image"), str):
        u.image = At(c["image"], c.line_of("image"))
    env_list = c.get("env")
    for item in env_list if isinstance(env_list, YList) else []:
        if isinstance(item, YMap) and isinstance(item.get("name"), str) and item.get("value") is not None:
            u.env[item["name"]] = At(str(item["value"]), item.line_of("value"))
    u.launches = launches(_words(c))
    u.nproc_declared = w.nproc or u.env.get("PET_NPROC_PER_NODE")
    u.trains = w.trains or bool(u.launches)

    visible = u.env.get("NVIDIA_VISIBLE_DEVICES")
    resources = _map(c, "resources")
    limits, requests = _map(resources, "limits"), _map(resources, "requests")
    for key in GPU_KEYS:
        if key in limits:
            u.gpus = At(_int(limits[key]), limits.line_of(key))
        if key in requests and _int(requests[key]) is not None:
            u.gpu_request = At(_int(requests[key]) or 0, requests.line_of(key))
    if u.gpus is None and visible is not None and visible.value.strip().lower() not in ("", "void", "none"):
        # GPUs handed over by the NVIDIA runtime (NVIDIA_VISIBLE_DEVICES) rather than the device plugin.
        count = None if visible.value.strip() == "all" else len(visible.value.split(","))
        u.gpus = At(count, visible.line)
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
                u.shm = At("tiny" if size is not None and size < table.shm().warn_below_bytes else "memory", at)
            elif vol is not None and str(_get(vol, "hostPath", "path") or "").rstrip("/") == "/dev/shm":
                u.shm = At("hostpath", vol.line_of("hostPath"))
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
