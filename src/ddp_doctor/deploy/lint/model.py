"""What the parsers extract from a config and the rules read: one Unit per container / command.

Every parser (Kubernetes, compose, Dockerfile, shell, Slurm) fills the same fields, each
value with the line it came from, so one rule can run over every kind of file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class At(Generic[T]):
    """A value and the 1-based line it was read from."""

    value: T
    line: int


@dataclass
class Launch:
    """What a command line starts: a distributed launcher and its flags."""

    tool: str
    """'torchrun' (also python -m torch.distributed.run / launch), 'accelerate', 'deepspeed', 'tune' or 'ddp-doctor'."""
    line: int
    nproc: At[str] | None = None
    """Ranks per node (for accelerate: --num_processes divided by --num_machines, when both are numbers)."""
    nnodes: At[str] | None = None
    rdzv_endpoint: At[str] | None = None
    master_addr: At[str] | None = None
    backend: At[str] | None = None
    """The process-group backend named on the command line (the launcher's or the training script's flag)."""
    standalone: bool = False
    under_srun: bool = False
    srun_nodes: At[int] | None = None
    """`srun -N/--nodes` of the step that starts the launcher (or a submitter's node count: srun_nodes_what)."""
    srun_nodes_what: str = "srun -N"
    srun_tasks_per_node: At[int] | None = None
    srun_tasks: At[int] | None = None
    """`srun -n/--ntasks` of that step: with fewer tasks than nodes, srun runs it on as many nodes as tasks."""
    srun_gpus: At[int] | None = None
    """GPUs per node that srun asks for (--gres=gpu:N, --gpus-per-node, --gpus-per-task)."""
    workers: At[int] | None = None
    """DataLoader workers per rank from the script's flags (--num_workers / --workers / -j)."""
    script: At[str] | None = None
    """The training script the launcher runs (the first *.py argument), as written."""
    spans_nodes: bool = False
    """The launcher starts the ranks of the other nodes itself (deepspeed over pdsh, accelerate over mpirun)."""
    device_hint: At[str] | None = None
    """'cpu' / 'gpu' when a flag says so (--no-cuda, --device cpu, accelerate --cpu / --multi_gpu)."""
    outputs: list[At[str]] = field(default_factory=list)
    """Where the training script is told to write checkpoints and logs (--output_dir, --save_dir, ...)."""
    data: list[At[str]] = field(default_factory=list)
    """Absolute paths the training script reads its data set from (--data_dir, the ImageNet example's DIR)."""
    total: At[int] | None = None
    """Ranks in all, where the launcher is given that rather than a count per node (mpirun -np)."""
    exports: dict[str, At[str]] = field(default_factory=dict)
    """Variables the starting command sets for the ranks: mpirun -x NAME=VALUE, srun --export, env NAME=VALUE."""
    as_root: At[str] | None = None
    """A flag that says the ranks run as root (mpirun --allow-run-as-root)."""
    hostfile: At[str] | None = None
    """deepspeed's --hostfile / -H, or mpirun's own hosts (-H / --host / --hostfile / --machinefile), when given."""
    oversubscribe: At[str] | None = None
    """mpirun told to start more ranks than slots (--oversubscribe, --map-by ...:OVERSUBSCRIBE)."""
    no_ssh: bool = False
    """deepspeed --no_ssh: the runner starts this node's ranks only (with --node_rank), as srun would have it."""
    expanded_before_srun: bool = False
    """Its words are expanded by the batch script's shell before srun starts it on every node (they are
    srun's own arguments, or a bash -c string in double quotes), so a per-node variable is read once."""
    deferred: tuple[str, ...] = ()
    """Variables escaped (\\$NAME) in that string: the shell on each node expands them, not the batch script's."""
    node_rank: At[str] | None = None
    """--node-rank (torchrun) / --machine_rank (accelerate): which node this is in a static rendezvous."""
    rdzv_backend: At[str] | None = None
    """--rdzv-backend; torchrun's default is 'static' (--master-addr + --node-rank)."""
    config_file: At[str] | None = None
    """accelerate --config_file: a file that may hold num_machines and machine_rank."""
    script_nodes: At[int] | None = None
    """The node count the training script is told by its own flags (Lightning's --num_nodes, trainer.num_nodes=)."""
    script_world: At[int] | None = None
    """The world size the training script is told by its own flag (--world_size N)."""
    entry: At[str] | None = None
    """The script or module (-m) torchrun, accelerate launch or deepspeed runs: where its own options end."""
    after_script: list[At[str]] = field(default_factory=list)
    """The launcher's own world-sizing options written after the training script, which the launcher hands
    to the script unread (--num_gpus, --nnodes, --num_processes ...)."""


IMAGE_DECIDES = "the image's USER decides (root for most CUDA and PyTorch images)"
"""The reason a container is taken to run as root when the config names no user: the image then says."""

MAX_ID = 2**31 - 1
"""The largest uid/gid Kubernetes (IsValidUserID) and the container runtimes (moby/sys/user ErrRange) take."""


def ids_out_of_range(user: str) -> bool:
    """Whether a Docker-style USER / --user / user: value 'uid[:gid]' holds a numeric id the runtime
    refuses ('-1', '2147483648'): runc's user lookup ends with 'uids and gids must be in range
    0-2147483647' and the container does not start. Names are looked up in the image, not judged here."""
    for part in user.split(":")[:2]:
        digits = part[1:] if part[:1] in "+-" else part
        if digits.isdigit() and not 0 <= int(part) <= MAX_ID:
            return True
    return False


_FILLED_LATER = re.compile(r"\{\{|\$|<[^<>\s][^<>]*>|__[A-Za-z][A-Za-z0-9_]*__|@[A-Za-z_]+@|%[A-Za-z_]+%")
"""How templates leave a value to be filled in before the file is used: Helm/Jinja `{{ x }}`, shell and
envsubst `$X` / `${X}`, `<your name>`, `__NAME__` (sed/Justfile substitution), `@NAME@` (autoconf,
CMake configure_file), `%NAME%`."""


def filled_later(value: str) -> bool:
    """Whether a value holds a template placeholder: it is judged once filled in, not as written."""
    return _FILLED_LATER.search(value) is not None


RuleArg = str | int | float | bool | None
"""A value a rule's text names ({nproc}, {value:rank} in rules.yaml): written as text, or counted in words."""
Ctx = dict[str, RuleArg]
"""What a rule's text names, by name: a finding's context."""


@dataclass(frozen=True)
class Structural:
    """A rule the parser found broken from the file's structure, where, and the words for its message."""

    rule: str
    line: int
    context: Mapping[str, RuleArg] = field(default_factory=dict)
    severity: str | None = None
    """Overrides the rule's severity where the structure makes the mistake only likely."""


@dataclass
class Unit:
    area: str
    """k8s | compose | docker | shell | slurm | dockerfile: the middle of the rule id."""
    file: str
    name: str
    """Where in the file, for messages: 'Job/train container trainer', 'service web', 'docker run'."""
    line: int
    image: At[str] | None = None
    launches: list[Launch] = field(default_factory=list)
    outputs: list[At[str]] = field(default_factory=list)
    """Where a training command started without a launcher (a PyTorchJob's `python train.py`) is told to
    write its checkpoints and logs; a launcher's are on its Launch."""
    trains: bool = False
    """A distributed training workload (torchrun, ddp-doctor, a PyTorchJob), so GPU/shm rules apply."""
    gpus: At[int | None] | None = None
    """GPUs granted: a count, None for 'all' (count unknown); the field is None when no GPU is granted."""
    gpu_request: At[int] | None = None
    gpus_all: At[str] | None = None
    """How the container is handed every GPU of the host ('--gpus all', 'count: all', 'NVIDIA_VISIBLE_DEVICES=all'),
    when it is, rather than a number or a list of devices."""
    nproc_declared: At[str] | None = None
    """nprocPerNode / PET_NPROC_PER_NODE, when the workload declares it outside the command."""
    nproc_what: str = "nprocPerNode"
    """Where nproc_declared was read (nprocPerNode, slotsPerWorker, PET_NPROC_PER_NODE), for messages."""
    tasks_per_node: At[int] | None = None
    """Slurm: tasks started per node (each task that runs torchrun starts nproc ranks)."""
    tasks_per_node_given: At[str] | None = None
    """Slurm: #SBATCH --ntasks-per-node written as a variable (${GPUS_PER_NODE}), its count left to sbatch's
    command line."""
    nodes: At[int] | None = None
    """How many nodes the workload spans (replicas, completions, #SBATCH --nodes)."""
    shm: At[str] | None = None
    """'memory' (memory-backed and sized), 'disk' (a volume that is not memory), 'host' (host IPC / host /dev/shm),
    'default' (nothing set: the runtime's 64 MiB), 'tiny' (sized under 1 GiB) or None (not applicable)."""
    shm_bytes: int | None = None
    memory_limit: At[int] | None = None
    ray_node: At[str] | None = None
    """What starts a Ray node in the container (KubeRay's Ray container, `ray start`): Ray keeps its object
    store in /dev/shm."""
    object_store: At[int] | None = None
    """The Ray node's object store size in bytes, when the config tells it (set, or Ray's share of the memory)."""
    runtime_class: At[str] | None = None
    runtime_class_applies: bool = False
    root: At[str] | None = None
    """Why it runs as root ('no runAsNonRoot / runAsUser', 'USER root'), or None."""
    unread_user: At[str] | None = None
    """The Dockerfile (or build context) whose last USER the container runs as, when lint could not read it."""
    privileged: At[bool] | None = None
    host_network: At[bool] | None = None
    host_ipc: At[bool] | None = None
    ipc_lock: At[bool] | None = None
    persistent_volume: bool | None = None
    """True when some mount outlives the container; None when the parser cannot tell."""
    mounts: list[At[str]] = field(default_factory=list)
    """Where storage that outlives the container, pod or cluster is mounted (volume targets)."""
    interactive: At[str] | None = None
    """A GPU container opened as a shell to work in by hand (compose tty + stdin_open, docker run -it, with
    a shell or no command): what is trained in it is written inside it."""
    holder: str = ""
    """What outputs off a volume go with, when it is not the area's usual one (a RayJob's deleted cluster)."""
    removed: bool = False
    """docker run --rm: the container, and what it wrote outside its volumes, goes when it exits."""
    inputs_only: At[str] | None = None
    """Every volume holds what the job reads (a data set, a read-only mount, the code it runs), none a place
    for what it writes: which, for messages ('/workspace/data (data), /workspace/NLP (the code it runs)')."""
    program: At[str] | None = None
    """A training program the container runs without a launcher (python train.py, a `train` entry point)."""
    workdir: str | None = None
    """The directory relative paths are taken from, when the config says (workingDir, -w, SkyPilot's ~/sky_workdir)."""
    env: dict[str, At[str]] = field(default_factory=dict)
    structural: list[Structural] = field(default_factory=list)
    """Mistakes the parser found from the file's structure alone (a PyTorchJob without a `pytorch`
    container, runAsUser: 0 beside runAsNonRoot: true)."""
    operator: str | None = None
    """Who starts the pods and injects the rendezvous: 'pytorchjob' and 'trainjob' set PET_NNODES /
    PET_NPROC_PER_NODE / PET_MASTER_ADDR for torchrun; 'jobset' and 'lws' give stable DNS names; None: nobody."""
    nodes_what: str = ""
    """How the node count was read, for messages: 'replicas', 'parallelism', '#SBATCH --nodes', 'srun -N'."""
    nodes_total: At[int] | None = None
    """A JobSet's pods over every replicatedJob that runs a launcher: a world may span a 'master' and a
    'workers' replicatedJob, so --nnodes may count them all."""
    elastic: At[str] | None = None
    """The min:max node range of an elasticPolicy, when the job has one."""
    rdzv_names: list[str] = field(default_factory=list)
    pod_hostnames: At[str] | None = None
    """An Indexed Job's pods are named JOB-INDEX (the value is JOB): a name other pods resolve only through
    the pod template's subdomain and a headless Service of that name."""
    subdomain: str | None = None
    """The pod template's spec.subdomain, when set."""
    pod_labels: dict[str, str] = field(default_factory=dict)
    services: list[str] = field(default_factory=list)
    """Headless Services of the same file whose selector takes in these pods (every one of them)."""
    """The host names the operator creates for the first pod (JobSet / TrainJob), when it is known."""
    gpu_evidence: At[str] | None = None
    """Why the workload is taken to need GPUs (the line and what it says), when something says so."""
    cpu_evidence: At[str] | None = None
    """Why the workload is taken to run on CPU (gloo, NVIDIA_VISIBLE_DEVICES=void, a CPU image...)."""
    template: bool = False
    """A runtime / template whose GPUs, nodes and command are filled in by the job that uses it."""
    data_copied: At[str] | None = None
    """A data set a Dockerfile copies or downloads into the image (COPY data/, RUN wget .../imagenet.tar)."""
    steps: list[At[str]] = field(default_factory=list)
    """Slurm: srun steps that run a program in every task with no launcher (one rank per task)."""
    allocation_outside: bool = False
    """Slurm: a script of srun steps with no #SBATCH line, run in an allocation made elsewhere (salloc, sbatch's
    command line) whose GPUs the file does not show."""
    script_nodes: list[At[int]] = field(default_factory=list)
    """Slurm: the node counts such steps' programs are told by their own flags (--num_nodes)."""
    script_world: list[At[int]] = field(default_factory=list)
    """Slurm: the world sizes such steps' programs are told by their own flags (--world_size)."""
    script_devices: list[At[int]] = field(default_factory=list)
    """Slurm: Lightning's devices per node such steps' programs are told (each task one rank)."""
    script_spawns: list[At[int]] = field(default_factory=list)
    """Slurm: the ranks such steps' programs spawn themselves in each task (--gpus N beside --world_size)."""
    ray_workers: At[int] | None = None
    """Ray Train workers in all (one GPU each), where the unit starts Ray nodes and a script told --num-workers N --use-gpu."""
    idles: At[str] | None = None
    """What keeps the command running after its work (a final long sleep, sshd -D, an endless loop)."""
    syntax: At[str] | None = None
    """bash -n's message for a script bash cannot parse."""
    role: str = ""
    """The part its pod plays in the job (deploy.lint.workloads: ranks, launcher, head, helper), '' when unsaid."""
    slots: At[int] | None = None
    """MPI slots per worker pod (MPIJob slotsPerWorker), for the launcher's mpirun -np."""
    slot_pods: At[int] | None = None
    """The pods whose slots the MPI operator's hostfile lists (the workers, and the launcher when it runs ranks)."""
    mpi_implementation: str = ""
    """The MPIJob's mpiImplementation (OpenMPI, Intel, MPICH), where the object says which MPI runs."""
    rankless: At[str] | None = None
    """Why an MPI launcher pod runs no rank (the operator's hostfile leaves it out), when the object says so."""
