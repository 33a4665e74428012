"""Kubernetes manifests (multi-document) -> one Unit per container of every pod template."""

from __future__ import annotations

import os
import re
from typing import Any

from ddp_doctor.checks import table
from ddp_doctor.deploy.lint.commandline import TORCHRUN_FLAGS, launches, script_outputs, training_program
from ddp_doctor.deploy.lint.idle import command_text, holds_forever
from ddp_doctor.deploy.lint.loader import YList, YMap, scalar_text
from ddp_doctor.deploy.lint.model import IMAGE_DECIDES, MAX_ID, At, Ctx, Structural, Unit, filled_later
from ddp_doctor.deploy.lint.quantity import k8s_bytes
from ddp_doctor.deploy.lint.shellparse import Word
from ddp_doctor.deploy.lint.workloads import (
    HEAD,
    HELPER,
    LAUNCHER,
    RANKS,
    PodTemplate,
    as_int,
    container_words,
    get,
    pod_templates,
    ymap,
)

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
}
GPU_KEYS = ("nvidia.com/gpu", "amd.com/gpu")
EPHEMERAL = {"emptyDir", "configMap", "secret", "downwardAPI", "projected", "ephemeral"}
PYTORCHJOB_CONTAINER = "pytorch"
"""The training operator rejects a replica without a container of this name (DefaultContainerName)."""


def units(doc: YMap, source: str) -> list[Unit]:
    out: list[Unit] = []
    for w in pod_templates(doc):
        pod = w.pod
        volumes = {v.get("name"): v for v in pod.get("volumes") or [] if isinstance(v, YMap)}
        containers = pod.get("containers")
        if not isinstance(containers, YList):
            continue
        found = [
            _container(c, i, containers.line_of(i), pod, volumes, w, source)
            for i, c in enumerate(containers)
            if isinstance(c, YMap)
        ]
        _mark_gpus_misplaced(found, pod, w.path)
        names = [c.get("name") for c in containers if isinstance(c, YMap)]
        _mark_restarted(found, _restarts_when_done(doc, pod))
        if doc.get("kind") not in (*ALWAYS_RESTARTED, "DaemonSet"):
            _held_by_sidecar(found, [c for c in containers if isinstance(c, YMap)])
        if doc.get("kind") == "PyTorchJob" and PYTORCHJOB_CONTAINER not in names and found:
            found[0].structural.append(Structural("pytorchjob_container_name", containers.line))
        if doc.get("kind") == "TrainJob":
            # The pod around the trainer (/dev/shm, user, volumes, runtimeClassName) is its runtime's, linted there;
            # the user too, unless the TrainJob names its own image on a stock runtime that sets no user.
            keep_user = _image_decides_user(doc)
            for u in found:
                u.shm, u.persistent_volume = None, None
                u.root = u.root if keep_user else None
                u.runtime_class_applies = False
        out += found
    if doc.get("kind") == "DaemonSet":
        for u in out:
            u.gpus_all = None  # node agents (device plugin, DCGM exporter) are meant to see every GPU of the node
    if _ends_when_done(doc):
        for u in out:
            waits = u.idles is not None and ("sshd" in u.idles.value or doc.get("kind") == "MPIJob")
            if waits and u.role != LAUNCHER:
                u.idles = None  # the job's policy (or its operator) ends the waiting workers
    if out:
        out[0].structural += _names(doc)
    launching = [u for u in out if u.launches and u.nodes is not None]
    if doc.get("kind") == "JobSet" and launching:
        seen: dict[str, int] = {u.name.split(" container ")[0]: u.nodes.value for u in launching if u.nodes}
        total = At(sum(seen.values()), launching[0].nodes.line if launching[0].nodes else doc.line)
        for u in out:
            u.nodes_total = total
    return out


ALWAYS_RESTARTED = ("Deployment", "ReplicaSet", "StatefulSet")
"""Kinds whose pods allow restartPolicy Always only: a container that ends is started again
(https://kubernetes.io/docs/concepts/workloads/controllers/deployment/#pod-template)."""


def _restarts_when_done(doc: YMap, pod: YMap) -> At[str] | None:
    """A training command under a policy that starts it again when it ends: the kinds above, and a bare Pod,
    whose restartPolicy defaults to Always (https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/
    #restart-policy)."""
    kind = doc.get("kind")
    policy = pod.get("restartPolicy")
    if kind in ALWAYS_RESTARTED:
        return At(
            f"is started again whenever its training ends (a {kind} restarts its pods always)", doc.line_of("kind")
        )
    if kind == "Pod" and policy in (None, "Always"):
        said = "restartPolicy: Always" if policy else "no restartPolicy, a Pod's default Always"
        return At(
            f"is started again whenever its training ends ({said})",
            pod.line_of("restartPolicy") if policy else doc.line_of("kind"),
        )
    return None


_SERVER = re.compile(
    r"\b(?:tensorboard|jupyter(?:-lab|\s+lab|\s+notebook)?|nginx|http\.server|mlflow\s+(?:server|ui)|fluent-bit|fluentd)\b"
)
"""Servers a sidecar runs until it is stopped: they do not end when the training does."""
SERVER_IMAGES = (
    "nginx",
    "fluent-bit",
    "fluentd",
    "envoy",
    "cloud-sql-proxy",
    "tensorboard",
    "prometheus",
    "pushgateway",
    "promtail",
    "opentelemetry-collector",
    "opentelemetry-collector-contrib",
)
"""Images whose entrypoint is a server (the daemon runs until it is stopped)."""
_EXPORTER = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)*[-_]exporter")
"""Prometheus exporters (node_exporter, dcgm-exporter, ...): HTTP servers that serve /metrics until stopped
(https://prometheus.io/docs/instrumenting/writing_exporters/; named *_exporter / *-exporter by
https://prometheus.io/docs/practices/naming/ and https://prometheus.io/docs/instrumenting/exporters/)."""


def _serves(name: str) -> bool:
    return name in SERVER_IMAGES or _EXPORTER.fullmatch(name) is not None


def _never_ends(u: Unit, c: YMap) -> str | None:
    """Why a container with no GPU runs on after the training: a command that holds forever, or a server. With no
    `command`, the image's entrypoint runs (given the container's `args`, if any): a server image serves."""
    if u.idles is not None:
        return u.idles.value
    words = container_words(c)
    text = command_text([w.text for w in words]) if words else ""
    server = _SERVER.search(text)
    if server is not None:
        return f"runs {server.group(0)}, a server that runs until it is stopped"
    program = os.path.basename(words[0].text) if words and "command" in c else ""
    if _serves(program):
        return f"runs {program}, a server that runs until it is stopped"
    image = str(c.get("image") or "").split("@")[0].rsplit(":", 1)[0].rsplit("/", 1)[-1]
    if "command" not in c and _serves(image):
        return f"runs the {image} image's server, which runs until it is stopped"
    return None


def _held_by_sidecar(found: list[Unit], containers: list[YMap]) -> None:
    """A pod ends when all its containers have: a sidecar that never ends keeps the training container's GPUs
    after its work (https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/: a native sidecar,
    an init container with restartPolicy: Always, is stopped for it; a second container is not)."""
    if len(found) < 2:
        return
    for v, c in zip(found, containers, strict=False):
        why = _never_ends(v, c) if v.gpus is None else None
        if why is None:
            continue
        for u in found:
            if u is not v and u.gpus is not None and u.idles is None and (u.trains or u.program is not None):
                u.idles = At(f"shares its pod with container {c.get('name', '?')}, which {why}", v.line)


def _mark_restarted(found: list[Unit], restarted: At[str] | None) -> None:
    for u in found:
        if restarted is not None and u.idles is None and u.launches and u.trains:
            u.idles = restarted  # the training starts again when it ends, and again: the GPUs never go back


RUNTIMES_WITHOUT_USER = ("torch-distributed", "torchtune-llama3.2-1b")
"""Kubeflow Trainer's stock runtimes whose pod templates set no runAsUser / runAsNonRoot, so the trainer runs as
its image's user (kubeflow/trainer manifests/base/runtimes/torch_distributed.yaml and
torchtune/llama3_2/llama3_2_1B.yaml at 8c0f5059; deepspeed_distributed.yaml and mlx_distributed.yaml set
runAsUser: 1000)."""


def _image_decides_user(doc: YMap) -> bool:
    trainer = ymap(ymap(doc, "spec"), "trainer")
    runtime = ymap(ymap(doc, "spec"), "runtimeRef")
    return "image" in trainer and runtime.get("name") in RUNTIMES_WITHOUT_USER


def headless_services(docs: list[Any]) -> dict[str, dict[str, str]]:
    """The file's headless Services (clusterIP: None) by name, with their selectors."""
    out: dict[str, dict[str, str]] = {}
    for doc in docs:
        if isinstance(doc, YMap) and doc.get("kind") == "Service":
            spec = ymap(doc, "spec")
            name = ymap(doc, "metadata").get("name")
            selector = ymap(spec, "selector")
            if spec.get("clusterIP") == "None" and isinstance(name, str) and selector:
                out[name] = {str(k): str(v) for k, v in selector.items()}
    return out


def tgi_shards(image: At[str] | None, env: dict[str, At[str]], words: list[Word]) -> At[str] | None:
    """Text Generation Inference starts one shard process per GPU: --num-shard / NUM_SHARD of its launcher."""
    if image is None or "text-generation-inference" not in image.value:
        return None
    for i, w in enumerate(words):
        name, eq, value = w.text.partition("=")
        if name == "--num-shard":
            if eq:
                return At(value, w.line)
            if i + 1 < len(words):
                return At(words[i + 1].text, words[i + 1].line)
    return env.get("NUM_SHARD")


def _ends_when_done(doc: YMap) -> bool:
    """Whether something ends the job's pods when the launcher is done: the MPI operator deletes an
    MPIJob's workers under cleanPodPolicy Running or All, not under its default None (kubeflow/mpi-operator
    v0.8.2 pkg/apis/kubeflow/v2beta1/default.go, pkg/controller/mpi_job_controller.go isCleanUpPods); a
    Volcano Job needs a policy whose action is CompleteJob."""
    spec = ymap(doc, "spec")
    if doc.get("kind") == "MPIJob":
        policy = ymap(spec, "runPolicy").get("cleanPodPolicy") or spec.get("cleanPodPolicy")
        return policy in ("Running", "All")
    policies = list(spec.get("policies") or [])
    for task in spec.get("tasks") or []:
        policies += list(task.get("policies") or []) if isinstance(task, YMap) else []
    return any(isinstance(p, YMap) and p.get("action") == "CompleteJob" for p in policies)


def _container(
    c: YMap, index: int, line: int, pod: YMap, volumes: dict[Any, YMap], w: PodTemplate, source: str
) -> Unit:
    where = f"{w.label} container {c.get('name', '?')} ({w.path if w.single else f'{w.path}.containers[{index}]'})"
    u = Unit("k8s", source, where, line, nodes=w.nodes)
    u.nodes_what, u.operator, u.elastic, u.rdzv_names, u.template = (
        w.nodes_what,
        w.operator,
        w.elastic,
        w.rdzv_names,
        w.template,
    )
    u.role = w.role
    u.pod_hostnames = w.pod_hostnames
    u.pod_labels = dict(w.labels)
    u.subdomain = pod["subdomain"] if isinstance(pod.get("subdomain"), str) else None
    if isinstance(c.get("image"), str):
        u.image = At(c["image"], c.line_of("image"))
    env_list = c.get("env")
    for item in env_list if isinstance(env_list, YList) else []:
        if isinstance(item, YMap) and isinstance(item.get("name"), str) and item.get("value") is not None:
            u.env[item["name"]] = At(str(item["value"]), item.line_of("value"))
    u.structural += _not_strings(c) + (w.refused if index == 0 else [])
    words = container_words(c)
    held = holds_forever(command_text([w.text for w in words])) if words else None
    u.idles = At(held, words[-1].line) if held is not None else w.outlives
    if w.ended_early and u.idles is not None and "sshd" in u.idles.value:
        u.idles = None  # the JobSet succeeds without these pods and deletes them
    own = launches(_with_entrypoint(c, words))
    # An MPIJob worker's ranks are started by the launcher's mpirun, over ssh: that command is what it runs.
    u.launches = own or (launches(w.peer_words) if w.peer_words else [])
    u.nproc_declared = w.nproc or u.env.get("PET_NPROC_PER_NODE")
    u.nproc_what = w.nproc_what if w.nproc is not None else "PET_NPROC_PER_NODE"
    shards = tgi_shards(u.image, u.env, words)
    if u.nproc_declared is None and shards is not None:
        u.nproc_declared, u.nproc_what = shards, "NUM_SHARD"
    u.slots, u.slot_pods, u.mpi_implementation, u.rankless = w.slots, w.slot_pods, w.mpi_implementation, w.rankless
    _work(u, w, words, bool(own))
    _resources(u, c)
    _shm(u, c, pod, volumes, line, w.shm_supplied if index == 0 else None)
    _ray_object_store(u, c, words, w, index)
    if isinstance(pod.get("runtimeClassName"), str):
        u.runtime_class = At(pod["runtimeClassName"], pod.line_of("runtimeClassName"))
    u.runtime_class_applies = u.gpus is not None
    if w.role == HEAD and u.gpus is not None:
        u.trains = True  # a Ray head given GPUs runs training workers too
    if not w.role and u.gpus is not None and held is not None and "sshd" in held:
        # GPU pods that only wait for ssh: an MPI or DeepSpeed launcher elsewhere starts the ranks in them.
        u.trains, u.role = True, RANKS
    _security(u, c, pod, line)
    if pod.get("hostNetwork") is True:
        u.host_network = At(True, pod.line_of("hostNetwork"))
    if pod.get("hostIPC") is True:
        u.host_ipc = At(True, pod.line_of("hostIPC"))
    _persistence(u, c, volumes, w)
    if isinstance(c.get("workingDir"), str):
        u.workdir = c["workingDir"]
    return u


def _work(u: Unit, w: PodTemplate, words: list[Word], launches_own: bool) -> None:
    """Whether the container trains (its kind says so, or it starts a launcher), what it writes, and the training
    program it runs itself when no launcher does (python train.py)."""
    u.trains = (w.trains or launches_own) and w.role not in (LAUNCHER, HELPER)
    if u.trains and not u.launches:
        u.outputs = script_outputs(words)
    if not u.launches and w.role not in (LAUNCHER, HELPER):
        u.program = training_program(words)


def _resources(u: Unit, c: YMap) -> None:
    """GPUs (device plugin limits, or the NVIDIA runtime's NVIDIA_VISIBLE_DEVICES) and the memory limit."""
    visible = u.env.get("NVIDIA_VISIBLE_DEVICES")
    resources = ymap(c, "resources")
    limits, requests = ymap(resources, "limits"), ymap(resources, "requests")
    for key in GPU_KEYS:
        if key in limits:
            u.gpus = At(as_int(limits[key]), limits.line_of(key))
        if key in requests and as_int(requests[key]) is not None:
            u.gpu_request = At(as_int(requests[key]) or 0, requests.line_of(key))
    if u.gpus is None and visible is not None and visible.value.strip().lower() not in ("", "void", "none"):
        # GPUs handed over by the NVIDIA runtime (NVIDIA_VISIBLE_DEVICES) rather than the device plugin.
        count = None if visible.value.strip() == "all" else len(visible.value.split(","))
        u.gpus = At(count, visible.line)
    if visible is not None and visible.value.strip() == "all":
        # Beside a device-plugin limit too: the runtime reads the variable and may expose every GPU of the node.
        u.gpus_all = At("NVIDIA_VISIBLE_DEVICES=all", visible.line)
    if "memory" in limits and k8s_bytes(limits["memory"]) is not None:
        u.memory_limit = At(k8s_bytes(limits["memory"]) or 0, limits.line_of("memory"))


def _persistence(u: Unit, c: YMap, volumes: dict[Any, YMap], w: PodTemplate) -> None:
    mounts = c.get("volumeMounts")
    persistent = False
    for m in mounts if isinstance(mounts, YList) else []:
        if not isinstance(m, YMap) or m.get("mountPath") == "/dev/shm":
            continue
        vol = volumes.get(m.get("name"))
        if vol is not None and not (set(vol) & EPHEMERAL):
            persistent = True
            if isinstance(m.get("mountPath"), str):
                u.mounts.append(At(m["mountPath"], m.line_of("mountPath")))
    u.persistent_volume = persistent or w.persists is not None
    if w.operator == "ray" and not persistent:
        # Ray Train keeps checkpoints where RunConfig(storage_path) says, not visible here, unless the
        # cluster is deleted with the job and nothing names storage outside it.
        u.persistent_volume = False if w.deleted_after is not None else None
        if w.deleted_after is not None:
            u.holder = f"Ray cluster, deleted when the job ends ({w.deleted_after.value}, line {w.deleted_after.line})"


RAY_OBJECT_STORE_SHARE = 0.3
"""Ray's object store takes this share of the node's memory unless told its size
(ray_constants.DEFAULT_OBJECT_STORE_MEMORY_PROPORTION; RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION overrides it)."""
RAY_OBJECT_STORE_CAP = 200 * 10**9
"""...and at most this many bytes (ray_constants.DEFAULT_OBJECT_STORE_MAX_MEMORY_BYTES)."""
_RAY_START = re.compile(r"\bray\s+start\b")
_STORE_FLAG = re.compile(r"--object-store-memory[= ]+([0-9]+)")


def _ray_object_store(u: Unit, c: YMap, words: list[Word], w: PodTemplate, index: int) -> None:
    """A Ray node's object store lives in /dev/shm: whether the container starts one (KubeRay starts it in
    the first container of each group's pods), and its size when the config tells it."""
    text = command_text([x.text for x in words]) if words else ""
    started = _RAY_START.search(text)
    if w.operator == "ray" and index == 0:
        u.ray_node = At("KubeRay starts a Ray node in this container", u.line)
    elif started is not None:
        u.ray_node = At("ray start", words[0].line)
    else:
        return
    flag = _STORE_FLAG.search(text)
    if w.object_store is not None and w.object_store.value.isdigit():
        u.object_store = At(int(w.object_store.value), w.object_store.line)
    elif flag is not None:
        u.object_store = At(int(flag.group(1)), words[0].line)
    else:
        resources = ymap(c, "resources")
        # Ray sizes it from the memory it sees: the container's limit (a request is a floor of it).
        sized = next((m for m in (ymap(resources, "limits"), ymap(resources, "requests")) if "memory" in m), None)
        size = k8s_bytes(sized["memory"]) if sized is not None else None
        share = u.env.get("RAY_DEFAULT_OBJECT_STORE_MEMORY_PROPORTION")
        try:
            fraction = float(share.value) if share is not None else RAY_OBJECT_STORE_SHARE
        except ValueError:
            fraction = RAY_OBJECT_STORE_SHARE
        if size is not None and sized is not None:
            u.object_store = At(min(int(size * fraction), RAY_OBJECT_STORE_CAP), sized.line_of("memory"))


def _with_entrypoint(c: YMap, words: list[Word]) -> list[Word]:
    """`args` alone that open with torchrun's flags are arguments to the image's ENTRYPOINT, a
    torchrun (torchelastic's images: python -m torchelastic.distributed.launch)."""
    if "command" not in c and words and words[0].text.partition("=")[0] in TORCHRUN_FLAGS:
        return [Word("torchrun", words[0].line), *words]
    return words


def _shm(u: Unit, c: YMap, pod: YMap, volumes: dict[Any, YMap], line: int, supplied: str | None) -> None:
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
            elif vol is not None and str(get(vol, "hostPath", "path") or "").rstrip("/") == "/dev/shm":
                u.shm = At("hostpath", vol.line_of("hostPath"))
            else:
                u.shm = At("disk", vol.line if isinstance(vol, YMap) else where)
            return
    if pod.get("hostIPC") is True:
        u.shm = At("host", pod.line_of("hostIPC"))
    elif supplied is not None and u.memory_limit is not None and u.memory_limit.value > 0:
        # KubeRay mounts a memory-backed /dev/shm itself, sized to the container's memory limit
        # (ray-project/kuberay ray-operator/controllers/ray/common/pod.go, makeEmptyDirVolume).
        u.shm, u.shm_bytes = At("memory", u.memory_limit.line), u.memory_limit.value
    elif supplied is not None:
        u.shm = None  # ... and with no memory limit, one bounded by the node only
    else:
        u.shm = At("default", line)


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


_READ_AT = re.compile(r"^(?:containers|initContainers)\[\d+\]\.resources\.(?:limits|requests)$")
"""Where the Pod API reads a container's GPU count (extended resources: limits, or requests equal to them)."""


def _gpu_keys(node: Any, path: str) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    if isinstance(node, YMap):
        for key, value in node.items():
            if key in GPU_KEYS and path.rsplit(".", 1)[-1] in ("limits", "requests") and not _READ_AT.match(path):
                found.append((f"{path}.{key}" if path else str(key), node.line_of(key)))
            found += _gpu_keys(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, YList):
        for i, item in enumerate(node):
            found += _gpu_keys(item, f"{path}[{i}]")
    return found


def _mark_gpus_misplaced(found: list[Unit], pod: YMap, where: str) -> None:
    """A GPU count written where the Pod API does not read one (an alpha proposal's extendedResources, a
    resources block under the wrong key or indentation): the containers are granted no GPU."""
    for path, line in _gpu_keys(pod, "")[:1]:
        if found:
            found[0].structural.append(
                Structural("gpu_request_misplaced", line, {"path": f"{where}.{path}" if where else path})
            )


def _names(doc: YMap) -> list[Structural]:
    """metadata.name must be a DNS-1123 subdomain (253 characters at most) and metadata.namespace a
    DNS-1123 label (63): the API server refuses the object otherwise. Templated names are left alone."""
    meta = ymap(doc, "metadata")
    found = []
    for key, pattern, most, what in (
        ("name", _DNS_SUBDOMAIN, 253, "a DNS-1123 subdomain"),
        ("namespace", _DNS_LABEL, 63, "a DNS-1123 label"),
    ):
        value = meta.get(key)
        if not isinstance(value, str) or filled_later(value):
            continue
        if len(value) > most or not pattern.match(value):
            ctx: Ctx = {"object": f"{doc.get('kind')}/{meta.get('name')}", "field": f"metadata.{key}"}
            ctx |= {"value": value, "rule": what, "most": most}
            found.append(Structural("invalid_name", meta.line_of(key), ctx))
    return found


"""Kubernetes validates user and group ids as 0..2147483647 (apimachinery IsValidUserID / IsValidGroupID)."""


_YAML_TYPES: tuple[tuple[type, str], ...] = ((bool, "boolean"), (int, "integer"), (float, "number"))
"""YAML scalars that are no string (YAML 1.1, as PyYAML and the API server's go-yaml v2 resolve them:
`1`, `1.5`, `true`, `yes`, `off`), in the order isinstance must test them (a bool is an int)."""


def _yaml_type(value: object) -> str | None:
    return next((name for kind, name in _YAML_TYPES if isinstance(value, kind)), None)


def _not_strings(c: YMap) -> list[Structural]:
    """A container's fields of type string (env[].value) and []string (command, args) given a YAML
    number or boolean: the API server refuses the whole object when it decodes it."""
    found: list[Structural] = []
    env_list = c.get("env")
    for item in env_list if isinstance(env_list, YList) else []:
        kind = _yaml_type(item.get("value")) if isinstance(item, YMap) else None
        if kind is not None:
            ctx: Ctx = {"field": f"env {item.get('name', '?')}", "value": scalar_text(item["value"]), "type": kind}
            found.append(Structural("value_not_string", item.line_of("value"), ctx))
    for key in ("command", "args"):
        items = c.get(key)
        if not isinstance(items, YList):
            continue
        for i, v in enumerate(items):
            kind = _yaml_type(v)
            if kind is not None:
                ctx = {"field": f"{key}[{i}]", "value": scalar_text(v), "type": kind}
                found.append(Structural("value_not_string", items.line_of(i), ctx))
    return found


def _security(u: Unit, c: YMap, pod: YMap, line: int) -> None:
    pod_sc, c_sc = ymap(pod, "securityContext"), ymap(c, "securityContext")
    user = c_sc.get("runAsUser", pod_sc.get("runAsUser"))
    non_root = c_sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
    for field_name, sc in [(k, sc) for sc in (pod_sc, c_sc) for k in ("runAsUser", "runAsGroup", "fsGroup")]:
        value = sc.get(field_name)
        valid = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ID
        templated = isinstance(value, str) and "{{" in value  # a placeholder, filled in later
        if field_name in sc and not valid and not templated:
            u.structural.append(Structural("invalid_id", sc.line_of(field_name), {"field": field_name, "value": value}))
    if user == 0:
        sc = c_sc if "runAsUser" in c_sc else pod_sc
        u.root = At("runAsUser: 0", sc.line_of("runAsUser"))
        if non_root is True:  # the kubelet refuses it: that finding says it, not run_as_root
            u.root = None
            where = c_sc if "runAsNonRoot" in c_sc else pod_sc
            u.structural.append(
                Structural(
                    "non_root_conflict", sc.line_of("runAsUser"), {"non_root_line": where.line_of("runAsNonRoot")}
                )
            )
    elif non_root is not True and not (isinstance(user, int) and user > 0):
        u.root = At(f"neither runAsNonRoot: true nor a non-zero runAsUser; {IMAGE_DECIDES}", line)
    if c_sc.get("privileged") is True:
        u.privileged = At(True, c_sc.line_of("privileged"))
    add = get(c_sc, "capabilities", "add")
    if isinstance(add, YList):
        for i, cap in enumerate(add):
            if str(cap).upper() in ("IPC_LOCK", "CAP_IPC_LOCK"):
                u.ipc_lock = At(True, add.line_of(i))
