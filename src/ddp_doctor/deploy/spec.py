"""The neutral launch spec: what to run, on how many nodes and GPUs, with which mounts.

Built from `ddp-doctor launch` flags or a small YAML file; each translator in this
package turns one LaunchSpec into a plain dict or argv, serialised last.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

from ddp_doctor import torchrun
from ddp_doctor.checks import table
from ddp_doctor.deploy.lint.loader import load_yaml_documents, read_text
from ddp_doctor.deploy.serialize import Expand
from ddp_doctor.errors import InputError, UsageError
from ddp_doctor.words import plural

GIB = 1024**3
MIB = 1024**2

# Defaults, documented in docs/launch.md. Per GPU so that a 1-GPU spec stays small and
# an 8-GPU node gets room for 8 ranks' DataLoader workers and NCCL's shared-memory rings; the
# size is the shared /dev/shm rule that check, image and lint advise (checks/knowledge.yaml).
SHM_PER_GPU = table.shm().per_gpu_bytes
MEMORY_PER_GPU = 16 * GIB
CPUS_PER_GPU = 8
DEFAULT_GPUS = 8
RDZV_PORT = 29500
DEFAULT_ENV = {"NCCL_DEBUG": "WARN", "PYTHONUNBUFFERED": "1"}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
# A DNS-1035 label (what a Kubernetes Service name must be: a letter first), at most 52 characters so
# that the names derived from it (NAME-0.NAME, NAME-worker-7, NAME-logs) stay within a 63-character label.
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,50}[a-z0-9])?$")
# A namespace is a DNS-1123 label: lower-case letters, digits and '-', at most 63.
# Source: kubernetes apimachinery pkg/util/validation (IsDNS1123Label, IsDNS1035Label).
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# An image reference as docker and containerd parse it: [registry[:port]/]path[:tag][@digest]; the first
# component is a registry only when it has a '.' or ':' or is localhost (docker's splitDockerDomain).
# Source: github.com/distribution/reference regexp.go and normalize.go.
_DOMAIN = re.compile(
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?$"
)
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(
    rf"^{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)


def is_image_ref(ref: str) -> bool:
    first, sep, rest = ref.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return bool(_DOMAIN.match(first)) and bool(_REPOSITORY.match(rest))
    return bool(_REPOSITORY.match(ref))


# Slurm's --time forms (sbatch(1)): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds; UNLIMITED/INFINITE for the partition's maximum.
_SLURM_TIME = re.compile(r"^(\d+(:\d{1,2}){0,2}|\d+-\d{1,2}(:\d{1,2}){0,2}|unlimited|infinite)$", re.IGNORECASE)
# A partition name, or several comma-separated (sbatch --partition=a,b takes the first that can run the job).
_PARTITION = re.compile(r"^[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*$")
# Container runtimes of a Slurm job: the pyxis SPANK plugin (srun --container-image, enroot), or
# Apptainer / SingularityCE (srun ... apptainer exec). None: the submitting environment, no container.
CONTAINER_RUNTIMES = ("pyxis", "apptainer", "singularity")
# A local image file: enroot's squashfs (pyxis --container-image=PATH) or Apptainer's SIF.
IMAGE_FILE_SUFFIXES = (".sqsh", ".squashfs", ".sif")


# What `--preflight` runs on every node before the job: the static checks, or the one-node live chain.
PREFLIGHTS = ("static", "live")
PREFLIGHT_S = 60
"""The preflight's bound: a node that has not passed it by then fails the job."""
GATHER_OFFSET = 100
# A Kubernetes object name (DNS-1123 subdomain). Source: kubernetes apimachinery IsDNS1123Subdomain.
_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def is_image_file(ref: str) -> bool:
    return ref.endswith(IMAGE_FILE_SUFFIXES) and not ref.startswith("-")


# Linux ids as Kubernetes accepts them (IsValidUserID / IsValidGroupID: 0..MaxInt32); 0 is root.
MAX_ID = 2**31 - 1


def parse_size(text: str | int, what: str) -> int:
    """'16g', '16Gi', '512m', '2GB' or a byte count -> bytes (binary units)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError(f"{what}: {text!r} is not a size; expected e.g. 16g, 16Gi or 512m")
    scale = {"": 1, "k": 1024, "m": MIB, "g": GIB, "t": 1024 * GIB}[m.group(2).lower()]
    return int(float(m.group(1)) * scale)


def gib_text(n: int, style: str) -> str:
    """Bytes -> '16Gi' (kubernetes), '16g' (docker), '16gb' (compose), '16G' (slurm)."""
    suffix = {"k8s": ("Gi", "Mi"), "docker": ("g", "m"), "compose": ("gb", "mb"), "slurm": ("G", "M")}[style]
    if n % GIB == 0:
        return f"{n // GIB}{suffix[0]}"
    return f"{max(1, n // MIB)}{suffix[1]}"


@dataclass(frozen=True)
class Mount:
    """A directory made visible in the container."""

    source: str
    """A host path (docker, compose, slurm; hostPath in Kubernetes) or `pvc:NAME` (Kubernetes only)."""
    target: str
    """The path inside the container."""
    read_only: bool = False
    name: str = "data"

    @property
    def claim(self) -> str | None:
        return self.source[4:] if self.source.startswith("pvc:") else None


def host_path(source: str) -> str:
    """A relative host path made absolute at run time (docker -v and pyxis need absolute paths)."""
    if source.startswith("/"):
        return source
    return Expand("${PWD}/" + source.removeprefix("./"))


@dataclass(frozen=True)
class LaunchSpec:
    image: str = ""
    """A container image reference; empty only for Slurm in the submitting environment (every other
    target refuses it, commands/launch.py). With a Slurm container runtime, also an image file path."""
    name: str = "ddp-doctor"
    """Job / service name; a DNS label."""
    nodes: int = 1
    min_nodes: int | None = None
    """Set for an elastic job: torchrun --nnodes MIN:MAX, a PyTorchJob elasticPolicy."""
    gpus_per_node: int = DEFAULT_GPUS
    devices: tuple[str, ...] = ()
    """Explicit GPU indices (docker / compose); when given, gpus_per_node == len(devices)."""
    all_devices: bool = False
    """docker / compose: every GPU of the host (`--gpus all`); gpus_per_node must be their number."""
    shm_bytes: int | None = None
    """/dev/shm size; default SHM_PER_GPU per GPU."""
    ipc_host: bool = False
    """docker / compose: share the host IPC namespace instead of sizing /dev/shm."""
    script: str | None = None
    """The user's training script, run through torchrun; None runs `ddp-doctor check`."""
    script_args: tuple[str, ...] = ()
    data: tuple[Mount, ...] = ()
    logs: Mount | None = None
    """Where logs and checkpoints go; default ./logs (pvc:NAME-logs on Kubernetes)."""
    env: tuple[tuple[str, str], ...] = tuple(DEFAULT_ENV.items())
    uid: int = 1000
    gid: int = 1000
    allow_root: bool = False
    """uid or gid 0 is refused unless set: root in the job is a choice, never a default."""
    cpus: int | None = None
    """CPUs per node; default CPUS_PER_GPU per GPU."""
    memory_bytes: int | None = None
    """Memory per node for the processes, without /dev/shm; default MEMORY_PER_GPU per GPU."""
    rdzv_port: int = RDZV_PORT
    namespace: str | None = None
    container_runtime: str | None = None
    """Slurm: pyxis, apptainer or singularity; None runs in the submitting environment (no --image)."""
    env_setup: tuple[str, ...] = ()
    """Slurm: shell lines run in the batch script before the job steps (`source venv/bin/activate`,
    `module load ...`); srun passes the environment they make to every task."""
    env_from: str = "--env-setup"
    """Where env_setup came from, for the script's comment (--env-setup, VIRTUAL_ENV, CONDA_PREFIX)."""
    partition: str | None = None
    time_limit: str | None = None
    """Slurm --time (e.g. 30, 4:00:00, 1-12); None: the partition's default."""
    ranks_per_task: bool = False
    """Slurm: srun starts one task per rank (RANK from SLURM_PROCID), no torchrun; else one torchrun per node."""
    preflight: str | None = None
    """Before the job's own command, on every node: `static` runs `ddp-doctor check --static`, `live` the
    one-node live chain (`ddp-doctor check`); an srun step in Slurm, an init container on Kubernetes."""
    watch: bool = False
    """Run --script under `ddp-doctor run --exit-code verdict` (a report on failure or hang, an exit code
    an orchestrator acts on); the Kubernetes targets then write the failure policies for those codes."""
    runtime: str | None = None
    """trainjob: an existing ClusterTrainingRuntime to reference instead of the one launch writes."""

    def __post_init__(self) -> None:
        problems = []
        problems += self._slurm_problems()
        if self.image and not is_image_ref(self.image) and not (self.container_runtime and is_image_file(self.image)):
            problems.append(
                f"--image {self.image!r} is not an image reference; expected [REGISTRY/]NAME[:TAG][@DIGEST], "
                "e.g. nvcr.io/nvidia/pytorch:24.05-py3"
            )
        if not _NAME.match(self.name):
            problems.append(
                f"--name {self.name!r} is not a DNS label; expected a lower-case letter, then letters, "
                "digits or '-', at most 52 characters"
            )
        if self.namespace is not None and not _NAMESPACE.match(self.namespace):
            problems.append(
                f"--namespace {self.namespace!r} is not a DNS-1123 label; expected lower-case letters, "
                "digits or '-', at most 63 characters, a letter or digit at each end"
            )
        problems += _id_problems(self.uid, self.gid, self.allow_root)
        if self.nodes < 1:
            problems.append(f"nodes is {self.nodes}; expected at least 1")
        if self.min_nodes is not None and not 1 <= self.min_nodes <= self.nodes:
            problems.append(f"min nodes is {self.min_nodes}; expected 1..{self.nodes}")
        if self.gpus_per_node < 0:
            problems.append(f"GPUs per node is {self.gpus_per_node}; expected 0 or more")
        if self.devices and len(self.devices) != self.gpus_per_node:
            problems.append(
                f"{plural(len(self.devices), 'device')} listed but {plural(self.gpus_per_node, 'GPU')} per node"
            )
        if not 1 <= self.rdzv_port <= 65535:
            problems.append(f"--rdzv-port {self.rdzv_port} is outside 1..65535")
        if self.cpus is not None and self.cpus < 1:
            problems.append(f"--cpus {self.cpus}: expected 1 or more CPUs per node")
        for flag, size in (("--memory", self.memory_bytes), ("--shm-size", self.shm_bytes)):
            if size is not None and size < MIB:
                problems.append(f"{flag} is {size} bytes; expected at least 1 MiB (e.g. 16g)")
        targets = [m.target for m in (*self.data, self.log_mount(kubernetes=False))]
        for target in sorted({t for t in targets if targets.count(t) > 1 or t == "/dev/shm"}):
            why = "the sized /dev/shm is mounted there" if target == "/dev/shm" else "two mounts name it"
            problems.append(f"mount target {target}: {why}; expected one mount per container path")
        if problems:
            raise UsageError("; ".join(problems))

    def _slurm_problems(self) -> list[str]:
        problems = []
        if self.container_runtime is not None and self.container_runtime not in CONTAINER_RUNTIMES:
            problems.append(
                f"--container-runtime {self.container_runtime!r}: expected one of {', '.join(CONTAINER_RUNTIMES)}"
            )
        if self.time_limit is not None and not _SLURM_TIME.match(self.time_limit):
            problems.append(
                f"--time {self.time_limit!r} is not a Slurm time; expected MINUTES, HH:MM:SS, DAYS-HH[:MM[:SS]] "
                "(e.g. 30, 4:00:00, 1-12)"
            )
        if self.partition is not None and not _PARTITION.match(self.partition):
            problems.append(f"--partition {self.partition!r}: expected a partition name (letters, digits, _ . -)")
        if self.preflight is not None and self.preflight not in PREFLIGHTS:
            problems.append(f"--preflight {self.preflight!r}: expected one of {', '.join(PREFLIGHTS)}")
        if self.runtime is not None and not _SUBDOMAIN.match(self.runtime):
            problems.append(
                f"--runtime {self.runtime!r} is not a Kubernetes object name; expected lower-case letters, "
                "digits, '-' or '.', at most 253 characters"
            )
        if any("\n" in line or "\0" in line for line in self.env_setup):
            problems.append("--env-setup: one shell line per flag (no newline); repeat the flag for several")
        return problems

    @property
    def root(self) -> bool:
        return self.uid == 0 or self.gid == 0

    @property
    def image_needs(self) -> str:
        """What the image must contain for the command to run: one line for the generated file."""
        where = "The image must contain" if self.image else "The submitting environment must provide"
        how = "pip install ddp-doctor in its Dockerfile" if self.image else "pip install ddp-doctor"
        if self.script is None:
            return f"{where} ddp-doctor and torch ({how}): the command is ddp-doctor check."
        launcher = "" if self.ranks_per_task else " (torchrun)"
        uses = [why for why, on in (("the preflight", self.preflight), ("ddp-doctor run", self.watch)) if on]
        doctor = f", and ddp-doctor for {' and '.join(uses)} ({how})" if uses else ""
        return f"{where} torch{launcher} and {self.script}{doctor}."

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1

    @property
    def ranks_per_node(self) -> int:
        """GPUs per node, or 2 CPU ranks with gloo when the spec asks for no GPU."""
        return self.gpus_per_node or 2

    @property
    def shm(self) -> int:
        return self.shm_bytes if self.shm_bytes is not None else SHM_PER_GPU * max(1, self.gpus_per_node)

    @property
    def memory(self) -> int:
        return self.memory_bytes if self.memory_bytes is not None else MEMORY_PER_GPU * max(1, self.gpus_per_node)

    @property
    def cpu_count(self) -> int:
        return self.cpus if self.cpus is not None else CPUS_PER_GPU * max(1, self.gpus_per_node)

    @property
    def shape(self) -> str:
        """'4 nodes x 8 GPUs', '1 node x 1 GPU': the first line of every generated file."""
        return f"{plural(self.nodes, 'node')} x {plural(self.gpus_per_node, 'GPU')}"

    @property
    def nnodes_arg(self) -> str:
        return f"{self.min_nodes}:{self.nodes}" if self.min_nodes is not None else str(self.nodes)

    def log_mount(self, kubernetes: bool) -> Mount:
        if self.logs is not None:
            return self.logs
        return Mount(f"pvc:{self.name}-logs" if kubernetes else "./logs", "/logs", name="logs")

    @property
    def gather_port(self) -> int:
        """Where node 0's `ddp-doctor run` (--watch) listens for the other nodes' reports: beside the rendezvous."""
        return (
            self.rdzv_port + GATHER_OFFSET
            if self.rdzv_port + GATHER_OFFSET <= 65535
            else self.rdzv_port - GATHER_OFFSET
        )

    def preflight_command(self) -> list[str]:
        """The preflight's check on one node: static, or the live chain on this node's GPUs (2 gloo ranks without)."""
        if self.preflight == "live":
            argv = ["ddp-doctor", "check", "--timeout", str(PREFLIGHT_S - 15), "--nproc", str(self.ranks_per_node)]
            return argv + ([] if self.gpus_per_node else ["--backend", "gloo"])
        return ["ddp-doctor", "check", "--static"]

    def entrypoint(
        self,
        node_rank: str,
        rdzv_host: str,
        rdzv_id: str,
        rdzv_port: str | None = None,
        gather_host: str | None = None,
    ) -> list[str]:
        """The container command: `ddp-doctor check` or torchrun + the user's script (under `ddp-doctor run`
        with --watch).

        node_rank / rdzv_host / rdzv_id / rdzv_port are target-specific expressions (a shell variable,
        a Kubernetes $(VAR)), used only for several nodes. gather_host: node 0's address for the watching
        doctors' one report (None where `ddp-doctor run` finds its nodes itself, under srun).
        """
        n = str(self.ranks_per_node)
        node_rank, rdzv_id = Expand(node_rank), Expand(rdzv_id)
        endpoint = Expand(f"{rdzv_host}:{rdzv_port or self.rdzv_port}")
        if self.script is None:
            argv = ["ddp-doctor", "check", "--nproc", n]
            if not self.gpus_per_node:
                argv += ["--backend", "gloo"]
            if self.multi_node:
                argv += ["--nnodes", self.nnodes_arg]
                if self.min_nodes is None:  # elastic: the rendezvous assigns node ranks
                    argv += ["--node-rank", node_rank]
                argv += ["--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id]
            return argv
        job = torchrun.argv(
            torchrun.TorchrunCommand(
                self.script,
                self.script_args,
                nproc=n,
                nnodes=self.nnodes_arg if self.multi_node else "1",
                rdzv_endpoint=endpoint if self.multi_node else None,
                rdzv_id=rdzv_id if self.multi_node else None,
            )
        )
        if not self.watch:
            return job
        doctor = ["ddp-doctor", "run", "--exit-code", "verdict"]
        if self.multi_node and gather_host is not None:
            gather = Expand(f"{gather_host}:{self.gather_port}")
            doctor += ["--nnodes", str(self.nodes), "--node-rank", node_rank, "--gather", gather]
        return [*doctor, "--", *job]


def _id_problems(uid: int, gid: int, allow_root: bool) -> list[str]:
    problems = []
    for flag, value in (("--uid", uid), ("--gid", gid)):
        if not 0 <= value <= MAX_ID:
            problems.append(f"{flag} {value} is not a Linux id; expected 1..{MAX_ID}")
        elif value == 0 and not allow_root:
            problems.append(f"{flag} 0 runs the job as root; expected 1..{MAX_ID}, or --allow-root to mean it")
    return problems


def parse_mount(text: str, name: str, what: str) -> Mount:
    """SRC:DEST[:ro]."""
    parts = text.split(":")
    if parts[0] == "pvc" and len(parts) >= 3:
        parts = [f"pvc:{parts[1]}", *parts[2:]]
    read_only = parts[-1] in ("ro", "rw") and len(parts) == 3 and parts.pop() == "ro"
    if len(parts) != 2 or not parts[0] or not parts[1].startswith("/"):
        raise UsageError(f"{what} {text!r}: expected SRC:/container/path[:ro] (SRC a host path or pvc:NAME)")
    return Mount(parts[0], parts[1], read_only, name)


def parse_env(items: list[str]) -> tuple[tuple[str, str], ...]:
    env = dict(DEFAULT_ENV)
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            raise UsageError(f"--env {item!r}: expected NAME=VALUE")
        env[key] = value
    return tuple(env.items())


class SpecFields(TypedDict, total=False):
    """LaunchSpec's fields as a spec file and the flags set them, before they are one LaunchSpec (build):
    flags over the file, the rest LaunchSpec's defaults. tests/deploy/test_launch.py holds it to LaunchSpec."""

    image: str
    name: str
    nodes: int
    min_nodes: int | None
    gpus_per_node: int
    devices: tuple[str, ...]
    all_devices: bool
    shm_bytes: int | None
    ipc_host: bool
    script: str | None
    script_args: tuple[str, ...]
    data: tuple[Mount, ...]
    logs: Mount | None
    env: tuple[tuple[str, str], ...]
    uid: int
    gid: int
    allow_root: bool
    cpus: int | None
    memory_bytes: int | None
    rdzv_port: int
    namespace: str | None
    container_runtime: str | None
    env_setup: tuple[str, ...]
    env_from: str
    partition: str | None
    time_limit: str | None
    ranks_per_task: bool
    preflight: str | None
    watch: bool
    runtime: str | None


# Spec-file keys -> LaunchSpec fields (and how to convert them). Unknown keys are an error
# so that a typo does not silently fall back to a default.
_FILE_KEYS = {
    "image": str,
    "name": str,
    "nodes": int,
    "min_nodes": int,
    "gpus_per_node": int,
    "namespace": str,
    "ipc_host": bool,
    "script": str,
    "uid": int,
    "gid": int,
    "allow_root": bool,
    "cpus": int,
    "rdzv_port": int,
    "container_runtime": str,
    "partition": str,
    "time": str,
    "ranks_per_task": bool,
    "preflight": str,
    "watch": bool,
    "runtime": str,
}
# Spec-file keys whose LaunchSpec field has another name.
_FIELD_OF = {"time": "time_limit"}


def _convert(key: str, value: Any) -> Any:
    conv = _FILE_KEYS[key]
    if conv is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{key} must be an integer, got {value!r}")
    if conv is bool and not isinstance(value, bool):
        raise TypeError(f"{key} must be true or false, got {value!r}")
    if key == "preflight":
        # `preflight: true` is the static check (what the flag alone means); else static or live.
        return "static" if value is True else None if value is False else str(value)
    if key == "time" and not isinstance(value, str):
        # YAML 1.1 reads an unquoted 4:00:00 as the base-60 number 14400: never guess minutes from it.
        raise TypeError(f"time must be a quoted string such as '4:00:00' or '30', got {value!r}")
    return conv(value)


def from_mapping(data: Mapping[str, Any], source: str) -> SpecFields:
    """A spec file's mapping -> LaunchSpec's fields (flags override them later)."""
    out = SpecFields()
    known = set(_FILE_KEYS) | {"devices", "shm_size", "memory", "script_args", "data", "logs", "env", "env_setup"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(
            f"{source}: unknown {'key' if len(unknown) == 1 else 'keys'} {', '.join(map(str, unknown))}; "
            f"known: {', '.join(sorted(known))}"
        )
    try:
        simple = {_FIELD_OF.get(k, k): _convert(k, data[k]) for k in _FILE_KEYS if data.get(k) is not None}
        out.update(cast(SpecFields, simple))  # each converted to its field's type by _convert
        if "devices" in data:
            out["devices"] = tuple(str(d) for d in data["devices"] or ())
        if "shm_size" in data:
            out["shm_bytes"] = parse_size(data["shm_size"], f"{source}: shm_size")
        if "memory" in data:
            out["memory_bytes"] = parse_size(data["memory"], f"{source}: memory")
        if "script_args" in data:
            out["script_args"] = tuple(str(a) for a in data["script_args"] or ())
        if "data" in data:
            out["data"] = tuple(
                parse_mount(str(m), f"data{i}" if i else "data", f"{source}: data")
                for i, m in enumerate(data["data"] or ())
            )
        if "logs" in data:
            out["logs"] = parse_mount(str(data["logs"]), "logs", f"{source}: logs")
        if "env_setup" in data:
            lines = data["env_setup"] or []
            out["env_setup"] = (lines,) if isinstance(lines, str) else tuple(str(line) for line in lines)
        if "env" in data:
            env = data["env"] or {}
            if not isinstance(env, dict):
                raise TypeError("env must be a mapping NAME: VALUE")
            out["env"] = parse_env([f"{k}={v}" for k, v in env.items()])
    except (TypeError, ValueError) as exc:
        raise InputError(f"{source}: {exc}") from None
    return out


def load_file(path: str) -> SpecFields:
    text = read_text(Path(path))
    docs = load_yaml_documents(text, path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError(
            f"{path}: a launch spec is one YAML mapping (image: ..., nodes: ...); found {plural(len(docs), 'document')}"
        )
    return from_mapping(docs[0].plain(), path)  # type: ignore[attr-defined]


def build(values: SpecFields) -> LaunchSpec:
    """The one LaunchSpec (which refuses itself when the values disagree); listed devices set the GPU count
    unless it is given."""
    chosen = values.copy()
    devices = values.get("devices")
    if devices and "gpus_per_node" not in values:
        chosen["gpus_per_node"] = len(devices)
    return LaunchSpec(**chosen)
