"""Where each kind of Kubernetes object keeps its pod templates, and what the object around a template
says about the job: how many pods it starts, how many ranks each runs, who injects the rendezvous,
and the template's role (the pods that run the ranks, an MPI launcher, a Ray head, a submitter).

One walker finds every pod spec by its shape (a `containers` list of mappings with an image or a
command), whatever kind nests it and however deep; the kinds below only add what their objects say
around the templates. A kind nobody wrote a handler for still has every pod template checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ddp_doctor.deploy.lint.argovars import out_of_scope
from ddp_doctor.deploy.lint.commandline import launches
from ddp_doctor.deploy.lint.loader import YList, YMap, load_yaml_documents
from ddp_doctor.deploy.lint.model import At, Structural
from ddp_doctor.deploy.lint.shellparse import Word
from ddp_doctor.errors import InputError
from ddp_doctor.words import plural

MAX_SEARCH = 20000
"""Nodes the walker visits per object; a manifest has hundreds."""

# Roles a pod template plays in its job.
RANKS = "ranks"
"""Its pods run the training ranks (a PyTorchJob replica, an MPIJob worker, a Ray worker group)."""
LAUNCHER = "launcher"
"""Its pod starts the ranks elsewhere (an MPIJob launcher running mpirun) and needs no GPU of its own."""
HEAD = "head"
"""A Ray head: runs the driver and schedules the workers; GPUs only when it is given some."""
HELPER = "helper"
"""A pod that submits or serves (a RayJob submitter): not judged as training."""


@dataclass
class PodTemplate:
    """One pod template of an object, with what the object around it says about the job."""

    label: str
    """'PyTorchJob/mnist': kind and name, for messages."""
    pod: YMap
    path: str = ""
    """Where the pod spec sits in the object: 'spec.pytorchReplicaSpecs.Worker.template.spec'."""
    role: str = ""
    """RANKS / LAUNCHER / HEAD / HELPER, or '' when the object does not say (judged by what it runs)."""
    nodes: At[int] | None = None
    nodes_what: str = ""
    nproc: At[str] | None = None
    nproc_what: str = "nprocPerNode"
    """Where the ranks per pod were read, for messages."""
    operator: str | None = None
    elastic: At[str] | None = None
    rdzv_names: list[str] = field(default_factory=list)
    template: bool = False
    trains: bool = False
    """The object itself is a training job (a PyTorchJob replica, a TrainJob's trainer)."""
    peer_words: list[Word] = field(default_factory=list)
    """The command that starts this template's ranks from another pod (an MPIJob launcher's mpirun)."""
    shm_supplied: str | None = None
    """Who mounts /dev/shm for the first container when the template does not (KubeRay does)."""
    persists: At[str] | None = None
    """What keeps the outputs when no volume does (Argo output artifacts)."""
    slots: At[int] | None = None
    """MPI slots per worker pod (MPIJob slotsPerWorker)."""
    slot_pods: At[int] | None = None
    """The pods the operator's hostfile lists with those slots (Worker replicas, + 1 with runLauncherAsWorker)."""
    mpi_implementation: str = ""
    rankless: At[str] | None = None
    """Why this launcher pod runs no rank, where the object says (MPIJob, a TrainingRuntime's mlPolicy.mpi)."""
    replicas: int | None = None
    """Pods started from this template alone (a Volcano task's replicas), when the object says."""
    single: bool = False
    """The path names the container itself (an Argo `container` / `script`), not a pod spec."""
    outlives: At[str] | None = None
    """Why the pods keep running after the job's work (a RayJob's cluster that is not shut down)."""
    deleted_after: At[str] | None = None
    """What deletes the pods, and their disks, when the job ends (a RayJob's shutdownAfterJobFinishes)."""
    refused: list[Structural] = field(default_factory=list)
    """What the object's validator refuses in this template (an Argo variable the template cannot see)."""
    object_store: At[str] | None = None
    """A Ray group's rayStartParams object-store-memory (bytes), when set."""
    pod_hostnames: At[str] | None = None
    """An Indexed Job's pod hostnames, JOB-INDEX (the value is JOB), where completionMode says so."""
    labels: dict[str, str] = field(default_factory=dict)
    """The pod template's metadata.labels (what a Service of the file selects), where read."""
    ended_early: bool = False
    """The object ends these pods once other pods' work is done (a JobSet successPolicy that does not wait
    for them), so a command of theirs that never returns keeps nothing."""
    stands_for: int | None = None
    """id() of the pod spec in the object that this (rebuilt) template replaces, so it is not read twice."""


def get(node: Any, *path: Any) -> Any:
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def ymap(node: Any, key: str) -> YMap:
    """node[key] when it is a mapping, else an empty one (absent and malformed read the same)."""
    value = node.get(key) if isinstance(node, dict) else None
    if isinstance(value, YMap):
        return value
    return _empty(getattr(node, "line", 1))


def _empty(line: int) -> YMap:
    m = YMap()
    m.line, m.key_lines, m.value_lines = line, {}, {}
    return m


def ylist(items: list[Any], line: int) -> YList:
    out = YList(items)
    out.line, out.item_lines = line, [getattr(i, "line", line) for i in items]
    return out


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _nodes(value: Any, line: int, what: str) -> tuple[At[int] | None, str]:
    n = as_int(value)
    return (At(n, line), what) if n is not None else (None, "")


def name_of(doc: Any) -> str:
    meta = ymap(doc, "metadata")
    return str(meta.get("name") or meta.get("generateName") or "?")


# --- the walker -----------------------------------------------------------------------------


def is_pod_spec(node: Any) -> bool:
    containers = node.get("containers") if isinstance(node, YMap) else None
    return isinstance(containers, YList) and any(
        isinstance(c, YMap) and ("image" in c or "command" in c or "args" in c) for c in containers
    )


def find_pod_specs(doc: Any) -> list[tuple[str, YMap]]:
    """Every pod spec in the object, with its path, in document order."""
    out: list[tuple[str, YMap]] = []
    budget = [MAX_SEARCH]
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack and budget[0] > 0:
        node, path = stack.pop()
        budget[0] -= 1
        if isinstance(node, YMap):
            if is_pod_spec(node):
                out.append((path, node))
                continue
            stack += [(v, f"{path}.{k}" if path else str(k)) for k, v in reversed(list(node.items()))]
        elif isinstance(node, YList):
            stack += [(v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node)))]
    return out


# --- the kinds ------------------------------------------------------------------------------

Handler = Callable[[YMap, str], list[PodTemplate]]


def _replica_specs(key: str, operator: str | None) -> Handler:
    """Kubeflow's training jobs: {key: {Master|Chief|Worker|PS|...: {replicas, template}}}."""

    def handler(doc: YMap, label: str) -> list[PodTemplate]:
        spec = ymap(doc, "spec")
        replicas = spec.get(key)
        if not isinstance(replicas, YMap):
            return []
        counts = [1 if get(r, "replicas") is None else as_int(get(r, "replicas")) for r in replicas.values()]
        job_nodes = At(sum(c for c in counts if c is not None), replicas.line) if None not in counts else None
        out = []
        for rtype, r in replicas.items():
            pod = get(r, "template", "spec")
            if isinstance(pod, YMap):
                out.append(
                    PodTemplate(
                        f"{label} {rtype}",
                        pod,
                        role=RANKS,
                        nodes=job_nodes,
                        nodes_what="replicas (all replica types)",
                        operator=operator,
                        trains=True,
                    )
                )
        return out

    return handler


def _pytorchjob(doc: YMap, label: str) -> list[PodTemplate]:
    out = _replica_specs("pytorchReplicaSpecs", "pytorchjob")(doc, label)
    spec = ymap(doc, "spec")
    elastic_map = ymap(spec, "elasticPolicy")
    elastic = None
    if "elasticPolicy" in spec:
        lo, hi = elastic_map.get("minReplicas"), elastic_map.get("maxReplicas")
        elastic = At(f"{lo if lo is not None else '?'}:{hi if hi is not None else '?'}", spec.line_of("elasticPolicy"))
    nproc: At[str] | None = None
    if spec.get("nprocPerNode") is not None:
        nproc = At(str(spec["nprocPerNode"]), spec.line_of("nprocPerNode"))
    elif elastic_map.get("nProcPerNode") is not None:
        nproc = At(str(elastic_map["nProcPerNode"]), elastic_map.line_of("nProcPerNode"))
    name = name_of(doc)
    for t in out:
        t.nproc, t.elastic, t.rdzv_names = nproc, elastic, [f"{name}-master-0", f"{name}-worker-0"]
    return out


def _mpijob(doc: YMap, label: str) -> list[PodTemplate]:
    """MPIJob (kubeflow/mpi-operator): the Launcher runs mpirun, which starts slotsPerWorker ranks in
    each Worker pod over ssh; the Worker's own command is only sshd."""
    spec = ymap(doc, "spec")
    replicas = ymap(spec, "mpiReplicaSpecs")
    slots_value = as_int(spec.get("slotsPerWorker", 1))
    slots = At(slots_value, spec.line_of("slotsPerWorker")) if slots_value is not None else None
    workers = ymap(replicas, "Worker")
    nodes, what = _nodes(workers.get("replicas", 1), workers.line_of("replicas"), "Worker replicas")
    launcher_pod = get(replicas, "Launcher", "template", "spec")
    # The operator's hostfile: each Worker with slotsPerWorker slots, and the launcher too when it runs ranks
    # (kubeflow/mpi-operator v2beta1 runLauncherAsWorker; mpiImplementation defaults to OpenMPI).
    as_worker = spec.get("runLauncherAsWorker") is True
    pods = None if nodes is None else At(nodes.value + (1 if as_worker else 0), nodes.line)
    implementation = str(spec.get("mpiImplementation") or "OpenMPI")
    rankless = (
        None if as_worker else At("an MPIJob's launcher runs mpirun and no rank: runLauncherAsWorker is not true", 0)
    )
    words: list[Word] = []
    for c in (launcher_pod or {}).get("containers") or []:
        if isinstance(c, YMap):
            words = container_words(c)
            break
    out = []
    for rtype, r in replicas.items():
        pod = get(r, "template", "spec")
        if not isinstance(pod, YMap):
            continue
        role = LAUNCHER if str(rtype) == "Launcher" else RANKS
        t = PodTemplate(
            f"{label} {rtype}",
            pod,
            role=role,
            nodes=nodes,
            nodes_what=what,
            operator="mpijob",
            trains=role == RANKS,
            slots=slots,
            slot_pods=pods,
            mpi_implementation=implementation,
        )
        if slots is not None and (role == RANKS or as_worker):
            t.nproc, t.nproc_what = At(str(slots.value), slots.line), "slotsPerWorker"
        if role == RANKS:
            t.peer_words = words
        elif rankless is not None:
            t.rankless = At(rankless.value, r.line if isinstance(r, YMap) else doc.line)
        out.append(t)
    return out


def container_words(c: YMap) -> list[Word]:
    words: list[Word] = []
    for key in ("command", "args"):
        items = c.get(key)
        if isinstance(items, YList):
            words += [Word(str(v), items.line_of(i)) for i, v in enumerate(items) if isinstance(v, (str, int, float))]
        elif isinstance(items, str):  # Argo and some CRDs take a string
            words.append(Word(items, c.value_line(key)))
    return words


def _volcano_job(doc: YMap, label: str) -> list[PodTemplate]:
    """Volcano's batch.volcano.sh Job: tasks[] of {name, replicas, template}. Its pytorch plugin sets
    MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK in every pod (one process per pod); its mpi plugin
    makes the master task the launcher."""
    spec = ymap(doc, "spec")
    tasks = spec.get("tasks")
    plugins = ymap(spec, "plugins")
    if not isinstance(tasks, YList):
        return []
    counts = [as_int(t.get("replicas", 1)) if isinstance(t, YMap) else None for t in tasks]
    total = At(sum(c for c in counts if c is not None), tasks.line) if None not in counts else None
    framework = next((p for p in ("pytorch", "mpi", "tensorflow") if p in plugins), None)
    master = _plugin_arg(plugins.get("mpi"), "master", "master") if framework == "mpi" else None
    out = []
    for task in tasks:
        pod = get(task, "template", "spec")
        if not isinstance(task, YMap) or not isinstance(pod, YMap):
            continue
        role = LAUNCHER if master is not None and task.get("name") == master else (RANKS if framework else "")
        out.append(
            PodTemplate(
                f"{label} task {task.get('name', '?')}",
                pod,
                role=role,
                nodes=total,
                nodes_what="replicas of every task",
                operator="volcano-pytorch" if framework == "pytorch" else None,
                trains=role == RANKS,
                replicas=as_int(task.get("replicas", 1)),
            )
        )
    return out


def _plugin_arg(args: Any, name: str, default: str) -> str:
    for a in args if isinstance(args, list) else []:
        key, eq, value = str(a).lstrip("-").partition("=")
        if key == name and eq:
            return value
    return default


def _ray_cluster(spec: YMap, label: str) -> list[PodTemplate]:
    """RayCluster spec: headGroupSpec + workerGroupSpecs[]. KubeRay mounts a memory-backed /dev/shm
    into the Ray container (the first) of every pod unless rayStartParams sets plasma-directory."""
    out = []
    supplied = "KubeRay mounts an emptyDir {medium: Memory} at /dev/shm for Ray's object store"
    head = ymap(spec, "headGroupSpec")
    pod = get(head, "template", "spec")
    if isinstance(pod, YMap):
        plasma = "plasma-directory" in ymap(head, "rayStartParams")
        out.append(
            PodTemplate(
                f"{label} head",
                pod,
                role=HEAD,
                operator="ray",
                shm_supplied=None if plasma else supplied,
                object_store=_object_store_param(head),
            )
        )
    groups = spec.get("workerGroupSpecs")
    for g in groups if isinstance(groups, YList) else []:
        pod = get(g, "template", "spec")
        if not isinstance(g, YMap) or not isinstance(pod, YMap):
            continue
        nodes, what = _nodes(g.get("replicas", g.get("minReplicas", 1)), g.line_of("replicas"), "replicas")
        plasma = "plasma-directory" in ymap(g, "rayStartParams")
        out.append(
            PodTemplate(
                f"{label} workerGroup {g.get('groupName', '?')}",
                pod,
                role=RANKS,
                nodes=nodes,
                nodes_what=what,
                operator="ray",
                trains=True,
                shm_supplied=None if plasma else supplied,
                object_store=_object_store_param(g),
            )
        )
    return out


def _object_store_param(group: YMap) -> At[str] | None:
    params = ymap(group, "rayStartParams")
    value = params.get("object-store-memory")
    return At(str(value), params.line_of("object-store-memory")) if value is not None else None


def _raycluster(doc: YMap, label: str) -> list[PodTemplate]:
    return _ray_cluster(ymap(doc, "spec"), label)


def _rayjob(doc: YMap, label: str) -> list[PodTemplate]:
    spec = ymap(doc, "spec")
    out = _ray_cluster(ymap(spec, "rayClusterSpec"), label)
    submitter = get(spec, "submitterPodTemplate", "spec")
    if isinstance(submitter, YMap):
        out.append(PodTemplate(f"{label} submitter", submitter, role=HELPER))
    if spec.get("shutdownAfterJobFinishes") is not True and not spec.get("clusterSelector"):
        # KubeRay deletes the RayCluster it made for the job only when told to; by default it stays.
        line = spec.line_of("shutdownAfterJobFinishes") if "shutdownAfterJobFinishes" in spec else spec.line
        for t in out:
            if t.role != HELPER:
                t.outlives = At("its RayCluster stays after the job (no shutdownAfterJobFinishes: true)", line)
    entrypoint = str(spec.get("entrypoint") or "")
    # Ray Train writes to RunConfig(storage_path), by default ~/ray_results on the cluster's own disk; a
    # cluster deleted when the job ends takes it along unless the entrypoint names storage elsewhere.
    if spec.get("shutdownAfterJobFinishes") is True and not re.search(r"://|storage[_-]path", entrypoint):
        for t in out:
            t.deleted_after = At("shutdownAfterJobFinishes: true", spec.line_of("shutdownAfterJobFinishes"))
    return out


def _rayservice(doc: YMap, label: str) -> list[PodTemplate]:
    return _ray_cluster(ymap(ymap(doc, "spec"), "rayClusterConfig"), label)


def _waits_for(spec: YMap, rjob: object) -> bool:
    """Whether a JobSet's success waits for replicatedJob `rjob`: its successPolicy (default: operator All
    over every replicatedJob) targets it, or targets all. When it does not, the JobSet succeeds without it
    and JobSet deletes its remaining jobs (kubernetes-sigs/jobset examples/simple/success-policy.yaml;
    API: "a null or empty list will apply to all replicatedJobs")."""
    policy = ymap(spec, "successPolicy")
    targets = policy.get("targetReplicatedJobs")
    if not isinstance(targets, list) or not targets:
        return policy.get("operator") != "Any" or len(spec.get("replicatedJobs") or []) < 2
    return rjob in targets


def _jobset_jobs(spec: YMap, js_name: str, label: str, template: bool) -> list[PodTemplate]:
    network = ymap(spec, "network")
    subdomain = network.get("subdomain") or js_name
    jobs = spec.get("replicatedJobs")
    out: list[PodTemplate] = []
    for job in jobs if isinstance(jobs, YList) else []:
        if not isinstance(job, YMap):
            continue
        rjob = job.get("name", "?")
        jspec = ymap(ymap(job, "template"), "spec")
        pod = get(jspec, "template", "spec")
        if not isinstance(pod, YMap):
            continue
        replicas = as_int(job.get("replicas", 1))
        parallelism = as_int(jspec.get("parallelism", 1))
        nodes = None
        what = ""
        if replicas is not None and parallelism is not None:
            line = jspec.line_of("parallelism") if "parallelism" in jspec else job.line
            nodes = At(replicas * parallelism, line)
            what = "replicas x parallelism" if replicas != 1 else "parallelism"
        names = [f"{js_name}-{rjob}-0-0.{subdomain}", f"{js_name}-{rjob}-0-0"]
        out.append(
            PodTemplate(
                f"{label} replicatedJob {rjob}",
                pod,
                nodes=nodes,
                nodes_what=what,
                operator="jobset",
                rdzv_names=names,
                template=template,
                ended_early=not _waits_for(spec, rjob),
            )
        )
    return out


def _jobset(doc: YMap, label: str) -> list[PodTemplate]:
    return _jobset_jobs(ymap(doc, "spec"), name_of(doc), label, template=False)


def _trainer_runtime(doc: YMap, label: str) -> list[PodTemplate]:
    spec = ymap(doc, "spec")
    ml = ymap(spec, "mlPolicy")
    out = _jobset_jobs(ymap(ymap(spec, "template"), "spec"), name_of(doc), label, template=True)
    torch = ml.get("torch")
    for w in out:
        # The node replicatedJob (trainjob-ancestor-step: trainer) runs the training; its size comes from the TrainJob.
        w.operator = "trainjob" if isinstance(torch, dict) else w.operator
        nodes, what = _nodes(ml.get("numNodes"), ml.line_of("numNodes"), "mlPolicy.numNodes")
        if nodes is not None and "replicatedJob node" in w.label:
            w.nodes, w.nodes_what = nodes, what
        proc = get(ml, "torch", "numProcPerNode")
        if proc is not None and isinstance(torch, YMap):
            w.nproc, w.nproc_what = At(str(proc), torch.line_of("numProcPerNode")), "numProcPerNode"
        mpi = ml.get("mpi")
        if isinstance(mpi, YMap) and mpi.get("runLauncherAsNode") is not True and "replicatedJob launcher" in w.label:
            # kubeflow/trainer trainingruntime_types.go: runLauncherAsNode "whether to run training process on the
            # launcher Job. Defaults to false."
            why = "a TrainingRuntime's launcher runs mpirun and no rank: mlPolicy.mpi.runLauncherAsNode is not true"
            w.rankless = At(why, mpi.line)
    return out


def _trainjob(doc: YMap, label: str) -> list[PodTemplate]:
    """A TrainJob has no pod template of its own: its trainer (command, image, resourcesPerNode, env,
    numNodes) is checked as the container it becomes; shm and security come from the runtime."""
    trainer = ymap(doc, "spec").get("trainer")
    if not isinstance(trainer, YMap):
        return []
    name = name_of(doc)
    container = YMap(trainer)
    container.line, container.key_lines, container.value_lines = trainer.line, dict(trainer.key_lines), {}
    container["name"] = "trainer"
    if "resourcesPerNode" in trainer:
        container["resources"] = container.pop("resourcesPerNode")
        container.key_lines["resources"] = trainer.line_of("resourcesPerNode")
    pod = _empty(trainer.line)
    pod["containers"] = ylist([container], trainer.line)
    nodes, what = _nodes(trainer.get("numNodes"), trainer.line_of("numNodes"), "trainer.numNodes")
    nproc = (
        At(str(trainer["numProcPerNode"]), trainer.line_of("numProcPerNode")) if "numProcPerNode" in trainer else None
    )
    return [
        PodTemplate(
            f"{label} trainer",
            pod,
            path="spec.trainer",
            role=RANKS,
            nodes=nodes,
            nodes_what=what,
            nproc=nproc,
            operator="trainjob",
            rdzv_names=[f"{name}-node-0-0.{name}"],
            trains=True,
        )
    ]


def _lws(doc: YMap, label: str) -> list[PodTemplate]:
    lwt = ymap(ymap(doc, "spec"), "leaderWorkerTemplate")
    nodes, what = _nodes(lwt.get("size", 1), lwt.line_of("size"), "leaderWorkerTemplate.size")
    out = []
    for key in ("leaderTemplate", "workerTemplate"):
        pod = get(lwt, key, "spec")
        if isinstance(pod, YMap):
            out.append(PodTemplate(f"{label} {key}", pod, nodes=nodes, nodes_what=what, operator="lws"))
    return out


def _one_job(job_spec: YMap, label: str) -> list[PodTemplate]:
    pod = get(job_spec, "template", "spec")
    if not isinstance(pod, YMap):
        return []
    key = "parallelism" if "parallelism" in job_spec else "completions"
    nodes, what = _nodes(job_spec.get(key, 1), job_spec.line_of(key), key)
    labels = ymap(get(job_spec, "template", "metadata"), "labels")
    return [PodTemplate(label, pod, nodes=nodes, nodes_what=what, labels={str(k): str(v) for k, v in labels.items()})]


def _job(doc: YMap, label: str) -> list[PodTemplate]:
    spec = ymap(doc, "spec")
    out = _one_job(spec, label)
    name = ymap(doc, "metadata").get("name")
    if spec.get("completionMode") == "Indexed" and isinstance(name, str):
        # Each pod's hostname is JOB-INDEX (a CronJob's jobs have generated names, so only a Job's).
        for t in out:
            t.pod_hostnames = At(name, spec.line_of("completionMode"))
    return out


def _cronjob(doc: YMap, label: str) -> list[PodTemplate]:
    return _one_job(ymap(ymap(ymap(doc, "spec"), "jobTemplate"), "spec"), label)


def _statefulset(doc: YMap, label: str) -> list[PodTemplate]:
    top = ymap(doc, "spec")
    pod = get(top, "template", "spec")
    if not isinstance(pod, YMap):
        return []
    nodes, what = _nodes(top.get("replicas", 1), top.line_of("replicas"), "replicas")
    return [PodTemplate(label, pod, nodes=nodes, nodes_what=what)]


def _argo(doc: YMap, label: str) -> list[PodTemplate]:
    """Argo Workflows: each template's container, script or containerSet is a pod of its own; volumes
    come from the template and the workflow (volumeClaimTemplates are PVCs); output artifacts are
    uploaded to the artifact repository when the step ends."""
    spec, prefix = ymap(doc, "spec"), "spec"
    if "workflowSpec" in spec:  # CronWorkflow
        spec, prefix = ymap(spec, "workflowSpec"), "spec.workflowSpec"
    shared = [v for v in spec.get("volumes") or [] if isinstance(v, YMap)]
    for claim in spec.get("volumeClaimTemplates") or []:
        if isinstance(claim, YMap):
            pvc = _empty(claim.line)
            pvc["name"], pvc["persistentVolumeClaim"] = get(claim, "metadata", "name"), {}
            shared.append(pvc)
    out = []
    templates = spec.get("templates")
    for i, t in enumerate(templates if isinstance(templates, YList) else []):
        if not isinstance(t, YMap):
            continue
        containers, key = _argo_containers(t)
        if not containers:
            continue
        _argo_patch(t, containers)
        original = t.get("containerSet") if key == "containerSet" else None
        pod = _empty(t.line)
        pod["containers"] = ylist(containers, t.line_of(key))
        pod["volumes"] = ylist(shared + [v for v in t.get("volumes") or [] if isinstance(v, YMap)], t.line)
        for k in ("securityContext", "hostNetwork", "hostIPC", "runtimeClassName"):
            src = t if k in t else spec
            if k in src:
                pod[k] = src[k]
                pod.key_lines[k] = src.line_of(k)
        artifacts = get(t, "outputs", "artifacts")
        persists = At("outputs.artifacts", t.line_of("outputs")) if isinstance(artifacts, YList) and artifacts else None
        out.append(
            PodTemplate(
                f"{label} template {t.get('name', i)}",
                pod,
                path=f"{prefix}.templates[{i}].{key}",
                persists=persists,
                stands_for=id(original) if original is not None else None,
                single=key != "containerSet",
                refused=out_of_scope(t),
            )
        )
    return out


def _argo_containers(t: YMap) -> tuple[list[YMap], str]:
    for key in ("container", "script"):
        c = t.get(key)
        if isinstance(c, YMap):
            c = _argo_script(c) if key == "script" else _copy(c)
            c.setdefault("name", "main")  # Argo names a template's only container `main`
            return [c], key
    cs = ymap(t, "containerSet")
    items = [c for c in cs.get("containers") or [] if isinstance(c, YMap)]
    mounts = cs.get("volumeMounts")
    if isinstance(mounts, YList):  # containerSet-level mounts apply to every container
        for c in items:
            c.setdefault("volumeMounts", mounts)
    return items, "containerSet"


def _copy(c: YMap) -> YMap:
    out = YMap(c)
    out.line, out.key_lines, out.value_lines = c.line, dict(c.key_lines), dict(c.value_lines)
    return out


def _argo_patch(t: YMap, containers: list[YMap]) -> None:
    """podSpecPatch (a pod spec as a YAML string, merged by container name) most often carries the
    GPU limit, templated: `nvidia.com/gpu: "{{inputs.parameters.gpus}}"`. Its resources are merged in."""
    text = t.get("podSpecPatch")
    if not isinstance(text, str):
        return
    try:  # padded so that line numbers are the file's
        docs = load_yaml_documents("\n" * (t.value_line("podSpecPatch") - 1) + text, "podSpecPatch")
    except InputError:
        return  # a patch that is not plain YAML (a template expression): read as absent
    for patched in get(docs[0] if docs else None, "containers") or []:
        target = next((c for c in containers if c.get("name") == get(patched, "name")), None)
        if target is None or not isinstance(get(patched, "resources"), YMap):
            continue
        resources = _copy(ymap(target, "resources"))
        for part in ("limits", "requests"):
            if isinstance(get(patched, "resources", part), YMap):
                merged = _copy(ymap(resources, part))
                merged.update(patched["resources"][part])
                merged.key_lines.update(patched["resources"][part].key_lines)
                resources[part] = merged
        target["resources"] = resources


def _argo_script(c: YMap) -> YMap:
    """A script template runs `command <file holding source>`: for a shell that is `sh -c source`."""
    out = _copy(c)
    command = c.get("command")
    source = c.get("source")
    if not isinstance(command, YList) or not command or not isinstance(source, str):
        return out
    if str(command[0]).rsplit("/", 1)[-1] in ("bash", "sh", "zsh", "dash", "ksh"):
        flag = [] if str(command[-1]).startswith("-") and "c" in str(command[-1]) else ["-c"]
        words = ylist([*command, *flag, source], c.line_of("command"))
        words.item_lines = [*command.item_lines, *([command.line] * len(flag)), c.value_line("source")]
        out["command"], out["args"] = words, None
    return out


HANDLERS: dict[str, Handler] = {
    "PyTorchJob": _pytorchjob,
    "TFJob": _replica_specs("tfReplicaSpecs", None),
    "XGBoostJob": _replica_specs("xgbReplicaSpecs", None),
    "PaddleJob": _replica_specs("paddleReplicaSpecs", None),
    "MXJob": _replica_specs("mxReplicaSpecs", None),
    "JAXJob": _replica_specs("jaxReplicaSpecs", None),
    "MPIJob": _mpijob,
    "batch.volcano.sh/Job": _volcano_job,
    "RayCluster": _raycluster,
    "RayJob": _rayjob,
    "RayService": _rayservice,
    "JobSet": _jobset,
    "ClusterTrainingRuntime": _trainer_runtime,
    "TrainingRuntime": _trainer_runtime,
    "TrainJob": _trainjob,
    "LeaderWorkerSet": _lws,
    "Job": _job,
    "CronJob": _cronjob,
    "StatefulSet": _statefulset,
    "Workflow": _argo,
    "WorkflowTemplate": _argo,
    "ClusterWorkflowTemplate": _argo,
    "CronWorkflow": _argo,
}


def _handler(doc: YMap) -> Handler | None:
    kind = str(doc.get("kind"))
    group = str(doc.get("apiVersion") or "").rpartition("/")[0]
    return HANDLERS.get(f"{group}/{kind}") or HANDLERS.get(kind)


def pod_templates(doc: YMap) -> list[PodTemplate]:
    """Each pod template of one object, with the job-level facts around it: the kind's handler says
    what it knows, the walker finds every other pod spec by its shape."""
    label = f"{doc.get('kind')}/{name_of(doc)}"
    handler = _handler(doc)
    known = handler(doc, label) if handler is not None else []
    by_pod = {id(t.pod): t for t in known}
    # Argo's containerSet is found by the walker too: the handler's copy (with the template's volumes) stands for it.
    claimed = {t.stands_for for t in known if t.stands_for is not None}
    out: list[PodTemplate] = []
    for path, pod in find_pod_specs(doc):
        t = by_pod.pop(id(pod), None)
        if t is None and id(pod) in claimed:
            continue
        t = t or PodTemplate(label, pod)
        t.path = t.path or path
        out.append(t)
    out += [t for t in known if id(t.pod) in by_pod]
    _mpi_over_ssh(out)
    return out


def _first_words(t: PodTemplate) -> list[Word]:
    containers = t.pod.get("containers")
    first = next((c for c in containers if isinstance(c, YMap)), None) if isinstance(containers, YList) else None
    return container_words(first) if first is not None else []


def _mpi_over_ssh(templates: list[PodTemplate]) -> None:
    """MPI set up by hand (a Volcano Job with the ssh plugin, a JobSet): one template runs mpirun, the
    others only sshd. The mpirun one is the launcher; the sshd ones run its ranks."""
    words = {id(t): _first_words(t) for t in templates if not t.role}
    starters = [t for t in templates if id(t) in words and any(x.tool == "mpirun" for x in launches(words[id(t)]))]
    daemons = [
        t for t in templates if id(t) in words and t not in starters and any("sshd" in w.text for w in words[id(t)])
    ]
    if len(starters) != 1 or not daemons:
        return
    launcher = starters[0]
    launcher.role = LAUNCHER
    mpirun = next(x for x in launches(words[id(launcher)]) if x.tool == "mpirun")
    pods = sum(t.replicas for t in daemons if t.replicas is not None)
    for t in daemons:
        t.role, t.trains, t.peer_words = RANKS, True, words[id(launcher)]
        if mpirun.total is not None and pods and all(d.replicas is not None for d in daemons):
            per, rest = divmod(mpirun.total.value, pods)
            if per and not rest:  # -np spread evenly over the daemon pods
                t.nproc, t.nproc_what = (
                    At(str(per), mpirun.total.line),
                    f"mpirun -np {mpirun.total.value} over {plural(pods, 'pod')}, so",
                )
