"""The checks: Unit -> hits (rule name, line, context). Wording and severity live in rules.yaml."""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources

import yaml

from ddp_doctor.checks import table
from ddp_doctor.deploy.lint.commandline import nnodes_max
from ddp_doctor.deploy.lint.infer import describe, workload
from ddp_doctor.deploy.lint.model import IMAGE_DECIDES, At, Ctx, Launch, RuleArg, Unit, filled_later
from ddp_doctor.deploy.lint.quantity import human
from ddp_doctor.deploy.lint.subject import exports, variable_verdicts, verdicts
from ddp_doctor.deploy.lint.workloads import HELPER, LAUNCHER
from ddp_doctor.report import Status
from ddp_doctor.words import count

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Hit:
    name: str
    line: int
    context: Mapping[str, RuleArg] = field(default_factory=dict)
    severity: str | None = None
    """Overrides the rule's severity where the same mistake is certain in one workload and only
    possible in another (shm_default: an error with several ranks, a warning when the ranks are unknown)."""


Text = str | Mapping[str, str]
"""A rule's text: one for every file, or one per launcher (torchrun, accelerate) or kind of file (k8s, slurm)."""


@dataclass(frozen=True)
class LintRule:
    """One entry of rules.yaml: the words and severity of a finding; the check that finds it is in this module."""

    name: str
    severity: str
    """One of SEVERITIES."""
    areas: tuple[str, ...]
    """The kinds of file it applies to (k8s, docker, compose, slurm, ...): its ids are lint.<area>.<name>."""
    title: str
    message: Text
    """What was seen and what was expected; {name} fills in the finding's context."""
    why: Text
    """The Result's cause."""
    fix: Text
    """The Result's remedy."""
    source: str
    """Where the fact comes from (a URL)."""

    @classmethod
    def of(cls, name: str, raw: Mapping[str, object]) -> LintRule:
        """The entry as written, refused (ValueError naming the rule and the key) unless it has every key right."""

        def text(key: str) -> Text:
            value = raw.get(key)
            if isinstance(value, str):
                return value
            if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
                return {str(k): v for k, v in value.items()}
            raise ValueError(f"rules.yaml: {name}.{key} is {value!r}, not a text or texts by launcher / kind of file")

        severity, areas, title, source = (raw.get(k) for k in ("severity", "areas", "title", "source"))
        if severity not in SEVERITIES:
            raise ValueError(f"rules.yaml: {name}.severity is {severity!r}, not one of {', '.join(SEVERITIES)}")
        if not isinstance(areas, list) or not areas or not isinstance(title, str) or not isinstance(source, str):
            raise ValueError(f"rules.yaml: {name} needs areas (a list), title and source")
        return cls(
            name, str(severity), tuple(map(str, areas)), title, text("message"), text("why"), text("fix"), source
        )


@functools.cache
def catalogue() -> dict[str, LintRule]:
    text = resources.files("ddp_doctor.deploy.lint").joinpath("rules.yaml").read_text(encoding="utf-8")
    return {str(name): LintRule.of(str(name), raw) for name, raw in yaml.safe_load(text).items()}


def rule_ids() -> list[str]:
    return [f"lint.{area}.{name}" for name, rule in catalogue().items() for area in rule.areas]


Finder = Callable[[Unit], Iterator[Hit]]
"""What looks for one kind of mistake in a unit (its hits name rules.yaml's rules). Named apart from the
check units (checks.model.Check): where a finder judges what a check unit judges, it asks that unit
through subject.verdicts."""
FINDERS: list[Finder] = []


def finder(fn: Finder) -> Finder:
    FINDERS.append(fn)
    return fn


# What starts the ranks of a pod whose own command names no launcher, by who runs the job.
OPERATOR_LAUNCHERS = {
    "pytorchjob": "a PyTorchJob",
    "trainjob": "a TrainJob",
    "mpijob": "MPI ranks",
    "ray": "Ray Train workers",
    "volcano-pytorch": "a Volcano PyTorch job",
}


def launcher(u: Unit) -> str:
    if u.launches:
        return u.launches[0].tool
    return OPERATOR_LAUNCHERS.get(str(u.operator), "training ranks")


@finder
def gpus_granted(u: Unit) -> Iterator[Hit]:
    if not u.trains or u.gpus is not None or u.area not in ("k8s", "docker", "compose", "skypilot") or u.template:
        return
    w = workload(u)
    if w.device is not None and w.device.value == "cpu":
        return
    expected = {
        "docker": "no --gpus",
        "compose": "no GPU device reservation",
        "skypilot": "no resources.accelerators, so SkyPilot provisions a node without GPUs",
    }.get(u.area, "")
    name = "gpu_limit_missing" if u.area == "k8s" else "gpus_missing"
    # Without anything that asks for CUDA/NCCL the job may well be a CPU one (gloo picked at run time):
    # noted, not an error.
    severity = None if w.device is not None else "info"
    yield Hit(name, u.line, {"launcher": launcher(u), "expected_flag": expected, "inferred": describe(w)}, severity)


@finder
def gpu_selection(u: Unit) -> Iterator[Hit]:
    if u.gpus_all is None or u.template:
        return
    w = workload(u)
    ranks = f"; the command starts {w.ranks_why}" if w.ranks is not None else ""
    yield Hit("gpus_all", u.gpus_all.line, {"what": u.gpus_all.value, "ranks": ranks})


@finder
def held_after_work(u: Unit) -> Iterator[Hit]:
    if u.idles is None or (u.template and u.gpus is None):
        return  # a runtime's template whose GPUs the job fills in is judged in the job
    w = workload(u)
    # A shell launcher's idles are set only where it started a Ray node or a GPU launcher.
    if (
        u.gpus is None
        and u.area != "shell"
        and not (u.area in ("slurm", "skypilot") and w.device is not None and w.device.value == "gpu")
    ):
        return  # holds no GPU: what it keeps is cheap
    yield Hit("gpus_held", u.idles.line, {"what": u.idles.value, "holder": HOLDERS.get(u.area, "container")})


@finder
def gpu_requests(u: Unit) -> Iterator[Hit]:
    if u.gpu_request is None:
        return
    limit = u.gpus.value if u.gpus is not None else None
    if limit != u.gpu_request.value:
        yield Hit(
            "gpu_request_mismatch",
            u.gpu_request.line,
            {"request": u.gpu_request.value, "limit": "none" if limit is None else limit},
        )


def _nproc(u: Unit) -> tuple[int, int] | None:
    """(ranks per node, line) from the command, else from nprocPerNode / PET_NPROC_PER_NODE."""
    for launch in u.launches:
        if launch.nproc is not None:
            return (int(launch.nproc.value), launch.nproc.line) if launch.nproc.value.isdigit() else None
    if u.nproc_declared is not None and u.nproc_declared.value.isdigit():
        return int(u.nproc_declared.value), u.nproc_declared.line
    return None


@finder
def nproc_matches_gpus(u: Unit) -> Iterator[Hit]:
    if u.rankless is not None:
        # An MPI launcher the operator leaves out of the hostfile: any GPU it holds drives no rank.
        if u.gpus is not None and u.gpus.value:
            ctx: Ctx = {"nproc": 0, "gpus": u.gpus.value, "idle": u.gpus.value, "tool": "mpi-launcher"}
            yield Hit("nproc_below_gpus", u.gpus.line, {**ctx, "gpus_line": u.gpus.line, "rankless": u.rankless.value})
        return
    granted = u.gpus
    if granted is None:
        granted = next((At[int | None](l.srun_gpus.value, l.srun_gpus.line) for l in u.launches if l.srun_gpus), None)
    if granted is None or granted.value is None:
        return
    found = _nproc(u)
    if found is None:
        return
    nproc, line = found
    gpus = granted.value
    tool = next((l.tool for l in u.launches if l.nproc is not None), "operator" if u.operator else "torchrun")
    if u.nproc_what == "NUM_SHARD" and not u.launches:
        tool = "tgi"
    ctx = {"nproc": nproc, "gpus": gpus, "idle": gpus - nproc, "tool": tool, "gpus_line": granted.line}
    if nproc > gpus:
        yield Hit("nproc_exceeds_gpus", line, ctx)
    elif nproc < gpus:
        yield Hit("nproc_below_gpus", line, ctx)


@finder
def mpi_slots(u: Unit) -> Iterator[Hit]:
    """An MPI operator's launcher: mpirun -np against the slots of the hostfile the operator writes (each pod
    it lists with slotsPerWorker slots). Open MPI refuses more ranks than slots; fewer leave GPUs idle."""
    if u.role != "ranks" or u.slots is None or u.slot_pods is None:
        return
    for launch in u.launches:
        if launch.tool != "mpirun" or launch.total is None or launch.hostfile is not None:
            continue  # no -np: Open MPI starts one rank per slot; own hosts: not the operator's hostfile
        slots = u.slots.value * u.slot_pods.value
        np = launch.total.value
        if np == slots or (np > slots and launch.oversubscribe is not None):
            return
        refused = np > slots and u.mpi_implementation == "OpenMPI"
        ctx: Ctx = {"np": np, "slots": slots, "pods": u.slot_pods.value, "per": u.slots.value}
        ctx["outcome"] = (
            "Open MPI refuses to start: 'There are not enough slots available in the system'"
            if refused
            else f"{'several ranks share a slot, and its GPU' if np > slots else f'{slots - np} slots, and their GPUs, stay idle'}"
        )
        yield Hit("mpi_slots_mismatch", launch.total.line, ctx, None if refused else "warning")
        return


@finder
def ray_train_gpus(u: Unit) -> Iterator[Hit]:
    """Ray Train workers, one GPU each, against the GPUs of the cluster the unit starts."""
    if u.ray_workers is None or u.gpus is None or u.gpus.value is None or u.launches:
        return
    nodes = u.nodes.value if u.nodes is not None else 1
    workers, gpus = u.ray_workers.value, u.gpus.value
    if nodes <= workers < gpus * nodes:
        per = workers // nodes  # Ray packs the workers, so some nodes may hold more: this many on most
        ctx: Ctx = {"nproc": per, "gpus": gpus, "idle": gpus - per, "tool": "ray-train", "gpus_line": u.gpus.line}
        yield Hit("nproc_below_gpus", u.ray_workers.line, ctx)


# Launchers that start their own ranks on the node (nproc of them): one Slurm task per node each.
PER_NODE_LAUNCHERS = ("torchrun", "tune", "ddp-doctor", "accelerate", "deepspeed")


@finder
def nproc_declared_twice(u: Unit) -> Iterator[Hit]:
    """nprocPerNode / numProcPerNode / PET_NPROC_PER_NODE beside a different --nproc-per-node."""
    declared = u.nproc_declared
    given = next((l for l in u.launches if l.nproc is not None and l.tool in ("torchrun", "tune")), None)
    if declared is None or given is None or given.nproc is None:
        return
    a, b = declared.value.strip("'\""), given.nproc.value.strip("'\"")
    if a != b and a.isdigit() and b.isdigit():
        ctx: Ctx = {"declared": a, "declared_what": u.nproc_what, "given": b, "given_line": given.nproc.line}
        yield Hit("nproc_conflict", declared.line, ctx)


@finder
def slurm_tasks(u: Unit) -> Iterator[Hit]:
    if u.area != "slurm":
        return
    for launch in u.launches:
        tasks = launch.srun_tasks_per_node or u.tasks_per_node
        if not launch.under_srun or launch.tool not in PER_NODE_LAUNCHERS:
            continue
        if tasks is not None and tasks.value > 1:
            yield Hit("tasks_per_node", tasks.line, {"tasks": tasks.value, "tool": launch.tool})
            return
        given = u.tasks_per_node_given
        if tasks is None and given is not None and launch.nproc is not None and _same_variable(given, launch.nproc):
            # Tasks per node and ranks per task both the GPU count: its square per node, unless it is 1.
            yield Hit("tasks_per_node", given.line, {"tasks": given.value, "tool": launch.tool}, "warning")
            return


_ONE_VARIABLE = re.compile(r"['\"]?\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?['\"]?")


def _same_variable(a: At[str], b: At[str]) -> bool:
    """Both values are the same shell variable, unexpanded (${GPUS_PER_NODE} and $GPUS_PER_NODE)."""
    ma, mb = _ONE_VARIABLE.fullmatch(a.value), _ONE_VARIABLE.fullmatch(b.value)
    return ma is not None and mb is not None and ma.group(1) == mb.group(1)


@finder
def shm(u: Unit) -> Iterator[Hit]:
    if u.shm is None or not u.trains:
        return
    if u.shm.value == "default":
        hit = _shm_default(u)
        if hit is not None:
            yield hit
    elif u.shm.value == "hostpath":
        yield Hit("shm_host_path", u.shm.line)
    elif u.shm.value == "disk" and u.area == "k8s":
        yield Hit("shm_not_memory", u.shm.line)
    elif u.shm.value == "tiny":
        # The verdict of the shm unit `check` uses, on this config (under 256 MiB fails, under 1 GiB warns).
        found = verdicts(u).get("shm")
        if found is None or found.status is Status.PASS:
            return
        severity = "error" if found.status is Status.FAIL else None
        gpus = u.gpus.value if u.gpus is not None else None
        yield Hit("shm_small", u.shm.line, {"shm": human(u.shm_bytes or 0), **table.shm().words(gpus)}, severity)


def _shm_default(u: Unit) -> Hit | None:
    """/dev/shm at the runtime's 64 MiB matters only where something uses it: DataLoader workers
    (batches pass through it) or several GPU ranks in the container (NCCL's shared-memory transport).
    An error where the file says so, a warning where the ranks cannot be counted, nothing for one rank
    or a CPU job without DataLoader workers (gloo does not use /dev/shm)."""
    assert u.shm is not None
    w = workload(u)
    cpu = w.device is not None and w.device.value == "cpu"
    loaders = w.workers is not None and w.workers.value > 0
    ranks = w.ranks.value if w.ranks is not None else None
    granted = u.gpus.value if u.gpus is not None else None
    # MPI ranks with no GPU granted and nothing saying GPU are CPU ranks: no NCCL segments in /dev/shm.
    mpi_on_cpu = granted is None and (w.device is None or w.device.value != "gpu") and launcher(u) == "mpirun"
    several = not cpu and not mpi_on_cpu and ranks is not None and ranks > 1
    # A runtime's template gets its GPUs from the job that uses it: its MPI ranks may well be GPU ranks.
    cpu_ranks = mpi_on_cpu and not u.template
    uncounted = not cpu and not cpu_ranks and ranks is None and granted != 1 and (w.workers is None or loaders)
    if not (loaders or several or uncounted):
        return None
    ctx: Ctx = {"launcher": launcher(u), "inferred": describe(w), **table.shm().words(ranks)}
    return Hit("shm_default", u.shm.line, ctx, None if (loaders or several) else "warning")


RAY_GPU_NODE_STORE_BYTES = int(0.3 * 16 * 2**30)
"""Ray's default object store on the smallest GPU machines clouds rent (16 GiB of memory, e.g. AWS
g4dn.xlarge): a /dev/shm below it holds the store on no GPU node."""


@finder
def ray_object_store(u: Unit) -> Iterator[Hit]:
    """A Ray node keeps its object store in /dev/shm; one smaller than the store sends it to disk."""
    if u.ray_node is None or u.shm is None:
        return
    if u.shm.value == "default":
        shm = table.shm().container_default_bytes
    elif u.shm.value in ("memory", "tiny") and u.shm_bytes is not None:
        shm = u.shm_bytes
    else:
        return
    if u.object_store is not None and u.object_store.value > shm:
        store = f"{human(u.object_store.value)}, line {u.object_store.line}"
    elif u.object_store is None and u.shm.value == "default":
        store = "30% of the node's memory, more than 64 MiB on any node that runs Ray"
    elif u.object_store is None and u.gpus is not None and shm < RAY_GPU_NODE_STORE_BYTES:
        # No memory limit or request: Ray sizes the store from the node's memory, which no GPU node keeps small.
        store = f"30% of the node's memory with no memory limit set, more than {human(shm)} on any GPU node"
    else:
        return
    yield Hit("shm_object_store", u.shm.line, {"store": store, "shm": human(shm), "node": u.ray_node.value})


@finder
def shm_within_memory(u: Unit) -> Iterator[Hit]:
    if u.shm is None or u.shm_bytes is None or u.memory_limit is None:
        return
    if u.shm_bytes > u.memory_limit.value:
        yield Hit(
            "shm_exceeds_memory_limit", u.shm.line, {"shm": human(u.shm_bytes), "limit": human(u.memory_limit.value)}
        )


@finder
def runtime_class(u: Unit) -> Iterator[Hit]:
    if u.runtime_class_applies and u.runtime_class is None:
        yield Hit("runtime_class_missing", u.line)


# Images whose Dockerfile ends with a non-root USER, so a config that names no user still runs as that user.
NON_ROOT_IMAGES = {
    # ray-project/ray docker/base-deps/Dockerfile: useradd ray --uid $RAY_UID (1000); USER $RAY_UID
    "rayproject/ray": "ray",
    "rayproject/ray-ml": "ray",
    # nginxinc/docker-nginx-unprivileged mainline/debian/Dockerfile (8ead5ce): ARG UID=101 ... USER $UID; its
    # README names the same image on Docker Hub, Quay and Amazon ECR.
    "nginxinc/nginx-unprivileged": "101",
    "quay.io/nginx/nginx-unprivileged": "101",
    "public.ecr.aws/nginx/nginx-unprivileged": "101",
}


def non_root_image(image: str) -> str | None:
    """The user a known image runs as when it is not root, from its repository name."""
    repo = image.split("@")[0].rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image.split("@")[0]
    for prefix in ("docker.io/", "index.docker.io/"):
        repo = repo.removeprefix(prefix)
    return NON_ROOT_IMAGES.get(repo)


@finder
def root(u: Unit) -> Iterator[Hit]:
    if u.unread_user is not None:
        yield Hit("user_unknown", u.unread_user.line, {"dockerfile": u.unread_user.value})
    said = verdicts(u).get("user")  # the user unit `check` and `image` use, on this config
    if u.root is None or said is None or said.status is not Status.WARN:
        return
    if u.area == "dockerfile":
        yield Hit("no_user" if u.root.value == "no USER" else "root_user", u.root.line, {"reason": u.root.value})
        return
    if IMAGE_DECIDES in u.root.value and u.image is not None and non_root_image(u.image.value) is not None:
        return
    if u.area != "k8s" or u.trains or u.role not in (LAUNCHER, HELPER):
        # Every container that does the job's work (training or serving); not an MPI launcher nor a submitter.
        yield Hit("run_as_root", u.root.line, {"reason": u.root.value})


@finder
def trade_offs(u: Unit) -> Iterator[Hit]:
    if u.privileged is not None:
        yield Hit("privileged", u.privileged.line)
    if u.host_network is not None:
        yield Hit("host_network", u.host_network.line)
    if u.host_ipc is not None:
        yield Hit("host_ipc", u.host_ipc.line)
    if u.ipc_lock is not None:
        yield Hit("ipc_lock", u.ipc_lock.line)


def unpinned(image: str) -> str | None:
    """' (":latest")' / ' (no tag: latest)' for an unpinned image; None when pinned."""
    if "@sha256:" in image or "$" in image:
        return None
    if image.startswith(("/", "./", "../", "~")) or image.endswith((".sqsh", ".sif", ".squashfs")):
        return None  # an enroot / apptainer image file: pinned by being a file
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return " (no tag, so :latest)"
    tag = last.rsplit(":", 1)[1]
    if tag == "latest":
        return " (:latest)"
    if re.search(r"(^|[-._])latest($|[-._])", tag) or tag in ("nightly", "edge"):  # latest-gpu, vllm011.latest
        return f" (:{tag}, a tag that moves with each release)"
    return None


@functools.cache
def official_images() -> frozenset[str]:
    text = resources.files("ddp_doctor.deploy.lint").joinpath("official_images.yaml").read_text(encoding="utf-8")
    return frozenset(yaml.safe_load(text)["images"])


def built_here(image: str) -> bool:
    """A single-word name that is no Docker Hub official image cannot be pulled: docker run and compose
    use the image of that name built on the host (docker build -t bert, compose build:)."""
    name = image.split("@", 1)[0].rsplit(":", 1)[0] if ":" in image else image
    return "/" not in name and "$" not in name and name not in official_images()


@finder
def pinned(u: Unit) -> Iterator[Hit]:
    if u.image is None:
        return
    if u.area in ("docker", "compose") and built_here(u.image.value):
        return  # a local build: nothing is pulled, on this host or another
    note = unpinned(u.image.value)
    if note is not None:
        yield Hit("latest_tag", u.image.line, {"image": u.image.value, "tag_note": note})


def uppercase_path(image: str) -> str | None:
    """The repository path of an image reference when it has capital letters, which the reference grammar
    refuses (path components are lowercase; only the registry host and the tag may have capitals)."""
    if filled_later(image) or image.split(":", 1)[0] == image.split(":", 1)[0].upper():
        return None  # filled in later: a variable, a template, a placeholder in capitals (IMAGE_NAME, <IMAGE>)
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[: len(name) - len(last[-1]) + last[-1].index(":")]
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # the registry host
    if any(_PLACEHOLDER_PART.match(part) for part in parts):
        return None  # YOUR_REGISTRY/app:1, ACCOUNT/app: a name in capitals left for the user to fill in
    path = "/".join(parts)
    return path if path != path.lower() else None


_PLACEHOLDER_PART = re.compile(
    r"^(?:[A-Z0-9]+_[A-Z0-9_]+|(?:YOUR|MY)[A-Z0-9]*|REGISTRY|ACCOUNT|PROJECT|ORG|REPO|REPOSITORY|NAMESPACE|USER|USERNAME)$"
)
"""A path component written as a name to replace (capitals joined by underscores, YOUR..., REGISTRY): templates
leave these for the user; a real reference with capitals mixes them into a name (MyOrg/Train)."""


@finder
def image_reference(u: Unit) -> Iterator[Hit]:
    if u.image is None:
        return
    path = uppercase_path(u.image.value)
    if path is not None:
        yield Hit("image_reference_invalid", u.image.line, {"image": u.image.value, "path": path})


# What a path that is on no volume belongs to, and goes with.
HOLDERS = {
    "k8s": "pod",
    "shell": "node (the pod, container or allocation running this script)",
    "skypilot": "cluster's nodes (sky down, autodown, a managed job's end)",
    "slurm": "allocation (until the job's time limit)",
}


@finder
def log_volume(u: Unit) -> Iterator[Hit]:
    if u.trains and u.persistent_volume is False:
        holder = u.holder or HOLDERS.get(u.area, "container")
        yield Hit("no_log_volume", u.line, {"launcher": launcher(u), "holder": holder})
    elif u.interactive is not None and u.gpus is not None and u.persistent_volume is False:
        # A GPU shell to train in by hand: whatever it trains is written inside the container.
        what = f"{u.interactive.value} to train in"
        yield Hit("no_log_volume", u.interactive.line, {"launcher": what, "holder": HOLDERS.get(u.area, "container")})


@finder
def outputs_unmounted(u: Unit) -> Iterator[Hit]:
    """A GPU container removed when it exits (--rm) whose every volume is an input (a data set, a read-only
    mount, the code it runs): what it trains there (checkpoints, logs, the model) is written inside it."""
    if u.area != "docker" or not u.removed or u.gpus is None or u.inputs_only is None:
        return
    if any(launch.outputs for launch in u.launches) or u.outputs:
        return  # outputs the command names are judged against the volumes (outputs_off_volume)
    what = launcher(u) if u.trains else (u.program.value if u.program else None)
    if what is None and u.interactive is not None:
        what = f"{u.interactive.value} to train in"
    if what is not None:
        yield Hit("outputs_unmounted", u.inputs_only.line, {"what": what, "mounts": u.inputs_only.value})


def _under(path: str, mounts: list[At[str]]) -> bool:
    return any(path == m.value.rstrip("/") or path.startswith(m.value.rstrip("/") + "/") for m in mounts)


@finder
def outputs_kept(u: Unit) -> Iterator[Hit]:
    """Outputs the command names (--output_dir, --checkpoint_dir, ...) on a path no volume covers,
    where the container or pod has volumes (with none at all, no_log_volume says so)."""
    if not (u.trains or u.program) or u.persistent_volume is not True or u.template:
        return
    for out in [*(o for launch in u.launches for o in launch.outputs), *u.outputs]:
        path = out.value.strip("'\"")
        if not path or "$" in path or "{{" in path or "://" in path:
            continue  # filled in later, or an object store the script writes to itself
        where = path
        if not path.startswith(("/", "~")):
            if u.workdir is None:
                where = f"{path} (relative to the image's working directory)"
                path = ""
            else:
                path = f"{u.workdir.rstrip('/')}/{path.removeprefix('./')}"
                where = f"{out.value} = {path}"
        if path and _under(path, u.mounts):
            continue
        if not path and any(m.value in ("/", ".") for m in u.mounts):
            continue
        holder = HOLDERS.get(u.area, "container")
        gone = {
            "docker": "--rm removes the container, and these files, when it exits"
            if u.removed
            else "they stay in the stopped container until it is removed",
            "compose": "they stay in the service's container until it is removed or recreated",
        }.get(u.area, f"they go with the {holder}")
        mounts = ", ".join(m.value for m in u.mounts) or "none"
        yield Hit("outputs_off_volume", out.line, {"path": where, "gone": gone, "mounts": mounts})
        return


@finder
def data_mounted(u: Unit) -> Iterator[Hit]:
    """The data set copied or downloaded into the image, or read from a path no volume provides."""
    if u.data_copied is not None:
        yield Hit("data_in_image", u.data_copied.line, {"what": u.data_copied.value})
        return
    if not u.trains or u.persistent_volume is None or u.template:
        return
    for launch in u.launches:
        for data in launch.data:
            path = data.value.strip("'\"")
            if "$" in path or "{{" in path or _under(path, u.mounts):
                continue
            what = f"the training command reads {path}, which no volume provides, so the data is in the image or fetched into the container"
            yield Hit("data_in_image", data.line, {"what": what})
            return


def is_local(host: str) -> bool:
    host = host.strip().strip("[]\"'")
    if host.lower() in ("localhost", "localhost.localdomain", "0.0.0.0", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def node_count(u: Unit) -> int:
    counts = [u.nodes.value if u.nodes is not None else 1]
    counts += [n for n in (nnodes_max(l) for l in u.launches) if n is not None]
    return max(counts)


def fewest_nodes(u: Unit) -> int:
    """The fewest nodes the job runs its launchers on: the scheduler's count, else the fewest an elastic
    launcher forms its world with (--nnodes=1:2 may well run, and meet, on one node alone)."""
    counts = [u.nodes.value if u.nodes is not None else 1]
    spans = (_nnodes_range(l.nnodes.value.strip("'\"")) for l in u.launches if l.nnodes is not None)
    return max(counts + [span[0] for span in spans if span is not None])


def nodes_from(u: Unit, best: int | None = None) -> str:
    """Where the node count was read: '--nnodes=2, line 3' or 'replicas (all replica types), line 7'."""
    best = node_count(u) if best is None else best
    for launch in u.launches:
        span = _nnodes_range(launch.nnodes.value.strip("'\"")) if launch.nnodes is not None else None
        if launch.nnodes is not None and (nnodes_max(launch) == best or (span is not None and span[0] == best)):
            return f"--nnodes={launch.nnodes.value}, line {launch.nnodes.line}"
    if u.nodes is not None:
        return f"{u.nodes_what or 'nodes'}, line {u.nodes.line}"
    return "?"


@finder
def multi_node_rendezvous(u: Unit) -> Iterator[Hit]:
    nodes = fewest_nodes(u)
    if nodes <= 1:
        return
    if any(launch.standalone for launch in u.launches):
        # The rendezvous address is ignored under --standalone; that flag is the mistake.
        for launch in u.launches:
            if launch.standalone:
                yield Hit("standalone_multinode", launch.line, {"nodes": nodes, "nodes_from": nodes_from(u, nodes)})
        return
    candidates = []
    for launch in u.launches:
        if launch.rdzv_endpoint is not None:
            candidates.append(
                ("--rdzv-endpoint", launch.rdzv_endpoint.value.rsplit(":", 1)[0], launch.rdzv_endpoint.line)
            )
        if launch.master_addr is not None:
            candidates.append(("--master-addr", launch.master_addr.value, launch.master_addr.line))
    if "MASTER_ADDR" in u.env:
        candidates.append(("MASTER_ADDR", u.env["MASTER_ADDR"].value, u.env["MASTER_ADDR"].line))
    tool = u.launches[0].tool if u.launches else ""
    for fld, value, line in candidates:
        if is_local(value):
            ctx: Ctx = {"nodes": nodes, "value": value, "field": fld, "tool": tool, "nodes_from": nodes_from(u, nodes)}
            yield Hit("master_addr_localhost", line, ctx)
            return


_PER_NODE_HOST = re.compile(
    r"^(?:\$\{?(HOSTNAME|SLURMD_NODENAME)(?![A-Za-z0-9_])\}?|\$\((hostname)[^)]*\)|`(hostname)[^`]*`)"
)
"""A host name each node fills in with its own: $HOSTNAME, $SLURMD_NODENAME, $(hostname)."""


@finder
def rendezvous_per_node(u: Unit) -> Iterator[Hit]:
    """A launcher srun starts on every node whose rendezvous host is the node's own name, expanded on each
    node (in a single-quoted bash -c, or escaped \\$HOSTNAME): every node points at itself."""
    if u.area != "slurm" or (u.nodes is not None and u.nodes.value <= 1):
        return
    for launch in u.launches:
        for fld, given in (("--rdzv-endpoint", launch.rdzv_endpoint), ("--master-addr", launch.master_addr)):
            m = _PER_NODE_HOST.match(given.value.strip("'\"")) if given is not None else None
            if given is None or m is None or not launch.under_srun:
                continue
            name = next(g for g in m.groups() if g)
            if launch.expanded_before_srun and name not in launch.deferred:
                continue  # the batch script's shell fills it in once, on the first node: one host for all
            ctx: Ctx = {"tool": launch.tool, "field": fld, "value": given.value}
            yield Hit("rdzv_host_per_node", given.line, ctx, None if u.nodes is not None else "warning")
            return


@finder
def slurm_srun(u: Unit) -> Iterator[Hit]:
    if u.area != "slurm" or u.nodes is None or u.nodes.value <= 1:
        return
    for launch in u.launches:
        # deepspeed (pdsh) and accelerate --mpirun_hostfile (mpirun) start the other nodes themselves.
        if not launch.under_srun and not launch.spans_nodes:
            yield Hit("torchrun_without_srun", launch.line, {"nodes": u.nodes.value, "tool": launch.tool})


def _nnodes_range(text: str) -> tuple[int, int] | None:
    lo, _, hi = text.partition(":")
    hi = hi or lo
    return (int(lo), int(hi)) if lo.isdigit() and hi.isdigit() else None


# Operators that hand torchrun its node count through PET_NNODES, so no --nnodes is needed.
INJECTS_NNODES = ("pytorchjob", "trainjob")


# deepspeed/launcher/runner.py: no hostfile at the path given (or at /job/hostfile by default) means
# "local resources only", on 127.0.0.1.
_NO_HOSTFILE = ("/dev/null", "")


@finder
def deepspeed_per_node(u: Unit) -> Iterator[Hit]:
    """DeepSpeed's runner is meant to run once: it reads the hostfile and starts every node itself (pdsh).
    Started on each node by srun it either finds no hostfile and trains on that node alone, or starts
    the whole job from every node."""
    for launch in u.launches:
        if launch.tool != "deepspeed" or not launch.under_srun or launch.no_ssh:
            continue
        step = launch.srun_nodes or u.nodes
        if step is None or step.value <= 1:
            continue
        hostfile = launch.hostfile.value.strip("'\"") if launch.hostfile is not None else None
        ctx: Ctx = {"nodes": step.value, "nodes_what": launch.srun_nodes_what if launch.srun_nodes else u.nodes_what}
        if hostfile is None or hostfile in _NO_HOSTFILE:
            what = f"--hostfile {hostfile}" if hostfile else "no --hostfile (the default /job/hostfile)"
            how = f"with {what}: each finds no hostfile and trains on its own node, a world of one node on 127.0.0.1"
            yield Hit("deepspeed_per_node", launch.line, {**ctx, "how": how})
        else:
            how = f"with --hostfile {hostfile}: each starts the job on every host of the hostfile, so it runs once per node"
            yield Hit("deepspeed_per_node", launch.line, {**ctx, "how": how}, "warning")


@finder
def launcher_flags_after_script(u: Unit) -> Iterator[Hit]:
    """torchrun, accelerate launch and deepspeed read their options up to the script only; the world
    options written after it go to the script, and the launcher starts its default world."""
    for launch in u.launches:
        if not launch.after_script or launch.entry is None:
            continue
        flags = ", ".join(f.value for f in launch.after_script)
        ctx: Ctx = {"tool": launch.tool, "flags": flags, "script": launch.entry.value}
        yield Hit("launcher_flags_after_script", launch.after_script[0].line, ctx)


@finder
def world_size(u: Unit) -> Iterator[Hit]:
    for launch in u.launches:
        if launch.tool in ("ddp-doctor", "deepspeed", "mpirun") or launch.standalone:
            continue  # --standalone is its own finding (standalone_multinode)  # deepspeed and mpirun read their hostfiles; ddp-doctor check is given --nnodes by its own launcher
        step = launch.srun_nodes
        what = launch.srun_nodes_what
        if step is None:
            # A launcher the batch script runs itself, not through srun, is judged against the allocation too
            # (that it starts on the first node only is torchrun_without_srun's finding).
            step, what = u.nodes, u.nodes_what
            tasks = launch.srun_tasks
            if step is not None and tasks is not None and tasks.value < step.value:
                # srun -n 1 in a job of 2 nodes: the step runs on as many nodes as it has tasks.
                step, what = At(tasks.value, tasks.line), "srun -n: fewer tasks than the job's nodes"
        if u.elastic is not None and launch.nnodes is not None and ":" not in launch.nnodes.value:
            yield Hit(
                "nnodes_fixed_elastic",
                launch.nnodes.line,
                {"tool": launch.tool, "nnodes": launch.nnodes.value, "range": u.elastic.value},
            )
            continue
        if step is None:
            continue
        ctx: Ctx = {"tool": launch.tool, "nodes": step.value, "nodes_what": what, "nodes_line": step.line}
        if launch.nnodes is None:
            once = u.area == "slurm" and not launch.under_srun
            if once and launch.spans_nodes:
                continue  # deepspeed / accelerate over mpirun start the other nodes themselves
            if max(step.value, u.nodes_total.value if u.nodes_total else 0) > 1 and u.operator not in INJECTS_NNODES:
                flag = "--num_machines" if launch.tool == "accelerate" else "--nnodes"
                # Run once by the batch script: a world of one node while the others idle (torchrun_without_srun
                # is the error); srun alone would then start a world of its own on every node.
                yield Hit(
                    "nnodes_mismatch",
                    launch.line,
                    {**ctx, "nnodes": f"no {flag} (default 1)"},
                    "warning" if once else None,
                )
            continue
        span = _nnodes_range(launch.nnodes.value.strip("'\""))
        total = u.nodes_total.value if u.nodes_total is not None else None
        if span is not None and not span[0] <= step.value <= span[1] and not (total and span[0] <= total <= span[1]):
            yield Hit("nnodes_mismatch", launch.nnodes.line, {**ctx, "nnodes": launch.nnodes.value})


_ARITHMETIC = re.compile(r"^\$\(\(\s*(\d+(?:\s*\*\s*\d+)*)\s*\)\)$")


def _number(text: str) -> int | None:
    """'16' or '$((2 * 8))' (what the script's own arithmetic leaves once its variables are filled in)."""
    text = text.strip("'\"")
    if text.isdigit():
        return int(text)
    m = _ARITHMETIC.match(text)
    if m is None:
        return None
    product = 1
    for factor in m.group(1).split("*"):
        product *= int(factor)
    return product


@finder
def slurm_world_size(u: Unit) -> Iterator[Hit]:
    """srun steps that each run one rank (no launcher) while the script states the world size itself: its
    own --world_size flag, or WORLD_SIZE for torch's env:// rendezvous, against the tasks srun starts."""
    if u.area == "slurm" and u.launches:
        yield from _launched_world(u)
        return
    if u.area != "slurm" or not u.steps:
        return
    per_node = u.tasks_per_node.value if u.tasks_per_node else 1
    # A program that spawns one rank per GPU itself is started once per node; with more tasks per node each is one.
    spawn = u.script_spawns[0] if u.script_spawns and per_node == 1 else None
    each = f"{count(spawn.value, 'rank')} it spawns itself (line {spawn.line})" if spawn is not None else "one rank"
    ranks = (u.nodes.value if u.nodes else 1) * (u.tasks_per_node.value if u.tasks_per_node else 1)
    ranks *= spawn.value if spawn is not None else 1
    told = [(w.value, w.line, "--world_size") for w in u.script_world]
    nodes = u.nodes.value if u.nodes else 1
    told += [(d.value * nodes, d.line, f"Lightning's devices x nodes: {d.value} x {nodes}") for d in u.script_devices]
    env = u.env.get("WORLD_SIZE")
    if env is not None and _number(env.value) is not None:
        told.append((_number(env.value) or 0, env.line, "WORLD_SIZE"))
    for size, line, what in told:
        if size != ranks:
            tasks = f"{u.nodes.value if u.nodes else 1} x {u.tasks_per_node.value if u.tasks_per_node else 1}"
            ctx: Ctx = {"told": size, "what": what, "ranks": ranks, "tasks": tasks, "each": each}
            yield Hit("world_size_conflict", line, ctx)
            return


def _launched_world(u: Unit) -> Iterator[Hit]:
    """A launcher srun starts on each node sets the world (nodes x its ranks per node); a --world_size the
    training script is told on top of it that says otherwise is a world the rendezvous does not form."""
    for launch in u.launches:
        told, step = launch.script_world, launch.srun_nodes or u.nodes
        nproc = _number(launch.nproc.value) if launch.nproc is not None else 1
        if told is None or not launch.under_srun or step is None or nproc is None:
            continue
        if told.value != step.value * nproc:
            each = f"{launch.tool}'s {count(nproc, 'rank')}"
            ctx: Ctx = {"told": told.value, "what": "--world_size", "ranks": step.value * nproc}
            yield Hit("world_size_conflict", told.line, {**ctx, "tasks": f"{step.value} x 1", "each": each})
            return


@finder
def script_node_count(u: Unit) -> Iterator[Hit]:
    """A training script told its node count by its own flags (Lightning's num_nodes) beside a job of
    another size: it computes a world size the launcher or Slurm does not start."""
    told = [(n, "srun") for n in u.script_nodes] + [(l.script_nodes, l.tool) for l in u.launches if l.script_nodes]
    if not told or (u.nodes is None and not any(nnodes_max(l) for l in u.launches)):
        return
    nodes = node_count(u)
    for n, starter in told:
        if n.value != nodes:
            ctx: Ctx = {"told": n.value, "nodes": nodes, "nodes_from": nodes_from(u), "starter": starter}
            yield Hit("script_nodes_mismatch", n.line, ctx)
            return


# Operators that hand each pod its node rank (PET_NODE_RANK) for torchrun's static rendezvous.
INJECTS_NODE_RANK = ("pytorchjob", "trainjob")


_RANK_FLAG = {"accelerate": "--machine_rank", "torchrun": "--node-rank"}


def _count_given_later(launch: Launch) -> str | None:
    """The node count as a variable the config does not set (a script argument, `--num_machines $3`),
    where the launcher is pointed at a master on another host: a launch written for several nodes."""
    count = launch.nnodes.value.strip("'\"") if launch.nnodes is not None else ""
    master = launch.master_addr.value.strip("'\"") if launch.master_addr is not None else ""
    if "$" not in count or not master or is_local(master):
        return None
    return count


@finder
def node_rank(u: Unit) -> Iterator[Hit]:
    """A static rendezvous (torchrun's default backend, accelerate's --main_process_ip) across several
    nodes needs each node's rank; without one every node is node 0."""
    if u.operator in INJECTS_NODE_RANK:
        return
    env = exports(u)
    fixed_env = _fixed_rank_variable(u, env)
    if fixed_env is not None:
        yield fixed_env
        return
    if "PET_NODE_RANK" in env:
        return
    for launch in u.launches:
        if launch.tool not in ("torchrun", "accelerate") or launch.standalone:
            continue
        fixed = launch.node_rank.value.strip("'\"") if launch.node_rank is not None else None
        per_node = re.search(r"\$\{?(SLURM_NODEID|SLURM_PROCID|SLURM_LOCALID)\b", fixed or "")
        if (
            launch.node_rank is not None
            and per_node
            and launch.expanded_before_srun
            and (per_node.group(1) not in launch.deferred)
        ):
            # The batch script's shell fills it in once, on the first node, before srun copies the command.
            rank = f"{fixed} (expanded once by the batch script's shell, before srun: 0 on every node)"
            ctx: Ctx = {"tool": launch.tool, "nodes": max(node_count(u), 2), "flag": "--node-rank", "rank": rank}
            # A warning: whether the batch step defines the variable (as 0) is the cluster's Slurm's to say.
            yield Hit("node_rank_fixed", launch.node_rank.line, ctx, "warning")
            continue
        if fixed is not None and not fixed.isdigit():
            continue  # a variable: set per node, as it should be
        if launch.tool == "accelerate" and (launch.config_file is not None or launch.spans_nodes):
            continue  # the config file may hold machine_rank; over mpirun the ranks come from MPI
        backend = launch.rdzv_backend.value.strip("'\"") if launch.rdzv_backend is not None else "static"
        if backend != "static":
            continue
        nodes: int | str | None = nnodes_max(launch)
        if nodes is None and launch.nnodes is not None and node_count(u) > 1:
            nodes = node_count(u)  # --nnodes $N, where the job's own node count is known
        given = _count_given_later(launch)
        if (nodes is None or nodes == 1) and given is not None and launch.node_rank is None:
            # --num_machines $N_NODES beside a remote --main_process_ip: written for several nodes, the
            # count given when it runs; with N > 1 every node is node 0 (a warning: N may be 1).
            ctx = {"tool": launch.tool, "nodes": given, "flag": _RANK_FLAG[launch.tool]}
            yield Hit("node_rank_missing", launch.nnodes.line if launch.nnodes else launch.line, ctx, "warning")
            continue
        if nodes is None or isinstance(nodes, str) or nodes <= 1:
            continue
        flag = _RANK_FLAG[launch.tool]
        ctx = {"tool": launch.tool, "nodes": nodes, "flag": flag}
        if launch.node_rank is None:
            yield Hit("node_rank_missing", launch.nnodes.line if launch.nnodes else launch.line, ctx)
            continue
        # One command for every node (srun, a pod template, a SkyPilot run) gives them all this rank;
        # a script run by hand may be a copy edited for each node: there it is noted, not judged.
        same = launch.under_srun or u.area in ("k8s", "skypilot", "compose")
        yield Hit("node_rank_fixed", launch.node_rank.line, {**ctx, "rank": fixed}, None if same else "info")


RANK_VARIABLES = ("NODE_RANK", "MACHINE_RANK", "PET_NODE_RANK")
NODES_VARIABLES = ("NNODES", "NUM_NODES", "N_NODES", "NUM_MACHINES", "PET_NNODES")


def _fixed_rank_variable(u: Unit, env: dict[str, At[str]]) -> Hit | None:
    """NODE_RANK=0 beside NNODES=3 handed to a launcher script: the node rank those scripts pass to
    torchrun is then the same wherever this file runs."""
    rank = next(((k, env[k]) for k in RANK_VARIABLES if k in env), None)
    nodes = next((env[k] for k in NODES_VARIABLES if k in env and env[k].value.strip("'\"").isdigit()), None)
    if rank is None or nodes is None or not rank[1].value.strip("'\"").isdigit() or int(nodes.value.strip("'\"")) <= 1:
        return None
    if any(l.node_rank is not None and not l.node_rank.value.strip("'\"").isdigit() for l in u.launches):
        return None  # the launcher is given a rank of its own
    ctx: Ctx = {
        "tool": f"a launcher told {rank[0]}",
        "nodes": int(nodes.value.strip("'\"")),
        "flag": rank[0],
        "rank": rank[1].value,
    }
    # The same pod template or task everywhere makes it certain; a hand-run script may be a copy per node.
    same = u.area in ("k8s", "skypilot", "compose")
    return Hit("node_rank_fixed", rank[1].line, ctx, "warning" if same else "info")


def _rdzv_hosts(u: Unit) -> list[tuple[str, str, int]]:
    found = []
    for launch in u.launches:
        if launch.rdzv_endpoint is not None:
            found.append(("--rdzv-endpoint", launch.rdzv_endpoint.value.rsplit(":", 1)[0], launch.rdzv_endpoint.line))
        if launch.master_addr is not None:
            found.append(("--master-addr", launch.master_addr.value, launch.master_addr.line))
    if "MASTER_ADDR" in u.env:
        found.append(("MASTER_ADDR", u.env["MASTER_ADDR"].value, u.env["MASTER_ADDR"].line))
    out = []
    for fld, host, line in found:
        m = re.fullmatch(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", host)
        if m:  # $(MASTER_ADDR) in a pod spec, $MASTER_ADDR in its script: the env entry, when the file sets it
            name = m.group(1) or m.group(2)
            if name not in u.env:
                continue
            host = u.env[name].value
        out.append((fld, host.strip("'\""), line))
    return out


@finder
def rendezvous_names(u: Unit) -> Iterator[Hit]:
    if u.operator not in ("jobset", "pytorchjob", "trainjob") or not u.rdzv_names or node_count(u) <= 1:
        return
    for fld, host, line in _rdzv_hosts(u):
        if "$" in host or is_local(host) or _is_ip(host):
            continue
        short = host.split(".", 1)[0]
        if host not in u.rdzv_names and not any(n.split(".", 1)[0] == short for n in u.rdzv_names):
            names = " or ".join(u.rdzv_names[:2] if u.operator == "pytorchjob" else u.rdzv_names[:1])
            yield Hit("rdzv_host_unknown", line, {"field": fld, "value": host, "names": names, "operator": u.operator})
            return


@finder
def indexed_hostname(u: Unit) -> Iterator[Hit]:
    """An Indexed Job's pod JOB-0 is found by other pods only as JOB-0.SUBDOMAIN, through the pod
    template's subdomain and a headless Service of that name."""
    if u.pod_hostnames is None or node_count(u) <= 1:
        return
    job = u.pod_hostnames.value
    for fld, host, line in _rdzv_hosts(u):
        first, _, rest = host.partition(".")
        if not re.fullmatch(rf"{re.escape(job)}-\d+", first):
            continue
        if u.subdomain is None:
            how = "the pod template sets no subdomain, so no DNS name is made for the pods"
        elif rest.split(".", 1)[0] != u.subdomain:
            how = f"the pods' DNS names are {first}.{u.subdomain} (spec.template.spec.subdomain)"
        else:
            continue
        sub = u.subdomain or job
        ctx: Ctx = {"field": fld, "value": host, "how": how, "name": f"{first}.{sub}", "subdomain": sub}
        yield Hit("rdzv_host_unresolvable", line, ctx)
        return


@finder
def rendezvous_service(u: Unit) -> Iterator[Hit]:
    """A rendezvous host that is a headless Service selecting every pod of the job: the name resolves to
    all of them, not to the one that hosts the store."""
    if not u.services or node_count(u) <= 1:
        return
    for fld, host, line in _rdzv_hosts(u):
        first = host.split(".", 1)[0]
        if first in u.services:
            yield Hit("rdzv_host_every_pod", line, {"field": fld, "value": host, "service": first})
            return


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


@finder
def slurm_gpus_requested(u: Unit) -> Iterator[Hit]:
    """A GPU job asking Slurm for no GPU: a launcher's job, or srun steps that run one rank per task."""
    if u.area != "slurm" or not (u.trains or u.steps) or u.gpus is not None or any(l.srun_gpus for l in u.launches):
        return
    if u.allocation_outside:
        return  # an srun wrapper's GPUs may come from the allocation it runs in (salloc --gres=gpu:8 ...)
    w = workload(u)
    if w.device is not None and w.device.value == "gpu":
        line = u.launches[0].line if u.launches else u.steps[0].line
        yield Hit("slurm_gpus_missing", line, {"inferred": describe(w, "node")})


# A variable's verdict (checks/variables.py, the table `check` and `image` use) -> the lint rule that reports it.
VERDICT_RULES = {
    "invalid": "variable_invalid",
    "empty": "variable_invalid",
    "devices": "variable_invalid",
    "rank": "variable_invalid",
    "unknown": "variable_unknown",
    "belief": "variable_not_read",
    "renamed": "variable_renamed",
    "setting": "variable_costly",
}
NAME_VERDICTS = ("unknown", "belief", "renamed")
"""Verdicts about the name alone, still right when the value is filled in later ($VAR, {{...}})."""
NCCL_NAMES = ("NCCL_", "TORCH_NCCL_")


@finder
def environment(u: Unit) -> Iterator[Hit]:
    """Every variable the config sets, judged by the env_vars unit `check` and `image` use (one verdict
    per variable, checks/variables.py), each reported on its own line under the rule of its verdict."""
    said = verdicts(u).get("env_vars")
    if said is None:
        return
    env = exports(u)
    w = workload(u)
    cpu_job = w.device is not None and w.device.value == "cpu"
    for verdict in variable_verdicts(said):
        rule = VERDICT_RULES.get(verdict.kind)
        value = env[verdict.variable].value
        templated = "$" in value or "{{" in value
        if rule is None or verdict.status == "pass" or (verdict.kind == "rank" and verdict.group):
            continue  # "set outside torchrun": a config sets them on purpose for the launch it runs
        if (cpu_job and verdict.variable.startswith(NCCL_NAMES)) or (templated and verdict.kind not in NAME_VERDICTS):
            continue  # NCCL does not run in a CPU job; a value filled in later cannot be judged
        ctx: Ctx = {"text": verdict.text, "remedy": verdict.remedy or "", "reference": verdict.source}
        yield Hit(rule, env[verdict.variable].line, ctx, "error" if verdict.status == "fail" else "warning")


@finder
def shell_syntax(u: Unit) -> Iterator[Hit]:
    if u.syntax is not None:
        yield Hit("syntax_error", u.syntax.line, {"message": u.syntax.value, "reader": "bash -n"})


@finder
def structure(u: Unit) -> Iterator[Hit]:
    for found in u.structural:
        yield Hit(found.rule, found.line, found.context, found.severity)


def severity(hit: Hit) -> str:
    return hit.severity or catalogue()[hit.name].severity


def evaluate(u: Unit) -> list[Hit]:
    rules = catalogue()
    hits = []
    for fn in FINDERS:
        for hit in fn(u):
            if u.area in rules[hit.name].areas:
                hits.append(hit)
    return hits
