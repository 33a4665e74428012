"""Shell scripts and Slurm batch scripts -> Units: one per `docker|podman run`, one per bare
torchrun / ddp-doctor command, and for an sbatch script one for the job as a whole."""

from __future__ import annotations

import ast
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

from ddp_doctor.checks import table
from ddp_doctor.deploy.lint.commandline import (
    SHELLS,
    TRAINING_NAME,
    RunCommand,
    gres_gpus,
    launches,
    program_at,
    ray_train_workers,
    run_command,
    script_devices,
    script_nodes,
    script_outputs,
    script_spawns,
    script_world_size,
)
from ddp_doctor.deploy.lint.datasets import holds_data
from ddp_doctor.deploy.lint.idle import command_text, holds_forever
from ddp_doctor.deploy.lint.model import IMAGE_DECIDES, At, Ctx, Launch, Structural, Unit, ids_out_of_range
from ddp_doctor.deploy.lint.quantity import docker_bytes
from ddp_doctor.deploy.lint.shellparse import (
    MAX_COMMANDS,
    Command,
    Functions,
    SyntaxProblem,
    Word,
    bash_syntax,
    commands,
    filled,
)
from ddp_doctor.deploy.lint.slurmvars import unset_reads

_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::?-[^}]*)?\}?")


def resolve(value: str, env: dict[str, At[str]]) -> str:
    """Expand $VAR / ${VAR} from the script's own assignments (one level; unknown ones stay)."""
    return _VAR.sub(lambda m: env[m.group(1)].value if m.group(1) in env else m.group(0), value)


def _gpu_count(run: RunCommand) -> At[int | None] | None:
    gpus = run.has("--gpus")
    if gpus is not None:
        value = gpus.value.strip("'\"")
        if value == "all":
            return At(None, gpus.line)
        if value.isdigit():
            return At(int(value), gpus.line)
        m = re.search(r"device=([0-9,]+)", value)
        if m:
            return At(len([d for d in m.group(1).split(",") if d]), gpus.line)
        m = re.search(r"count=(\d+)", value)
        return At(int(m.group(1)) if m else None, gpus.line)
    cdi = [d for d in run.values("--device") if d.value.startswith("nvidia.com/gpu")]
    if cdi:  # podman / CDI: --device nvidia.com/gpu=all or one --device per GPU index
        if any(d.value.endswith("=all") for d in cdi):
            return At(None, cdi[0].line)
        return At(len(cdi), cdi[0].line)
    runtime = run.has("--runtime")
    if (runtime is not None and runtime.value == "nvidia") or run.engine == "nvidia-docker":
        return At(None, runtime.line if runtime else run.line)
    return None


def _every_gpu(run: RunCommand, env: dict[str, At[str]]) -> At[str] | None:
    """How `docker run` hands the container every GPU of the host, when it does."""
    visible = env.get("NVIDIA_VISIBLE_DEVICES")
    gpus = run.has("--gpus")
    if gpus is not None:
        value = gpus.value.replace('"', "").replace("'", "")  # device="all" once a variable is filled in
        named_all = value == "all" or value.startswith("all,") or "device=all" in value
        return At(f"--gpus {value}", gpus.line) if named_all else None
    cdi = next((d for d in run.values("--device") if d.value == "nvidia.com/gpu=all"), None)
    if cdi is not None:
        return At("--device nvidia.com/gpu=all", cdi.line)
    runtime = run.has("--runtime")
    nvidia = (runtime is not None and runtime.value == "nvidia") or run.engine == "nvidia-docker"
    line = runtime.line if runtime is not None else run.line
    if visible is not None and visible.value.replace('"', "").replace("'", "") == "all":
        return At("NVIDIA_VISIBLE_DEVICES=all", visible.line)
    nv_gpu = env.get("NV_GPU")
    if nvidia and nv_gpu is not None and nv_gpu.value.replace('"', "").replace("'", "") == "all":
        return At("NV_GPU=all", nv_gpu.line)  # nvidia-docker's own selection, set to every GPU
    if nvidia and visible is None and "NV_GPU" not in env:
        # The NVIDIA runtime exposes what NVIDIA_VISIBLE_DEVICES says; CUDA images set it to all.
        what = "--runtime=nvidia" if runtime is not None else "nvidia-docker"
        return At(f"{what} without NVIDIA_VISIBLE_DEVICES or NV_GPU, which CUDA images set to all", line)
    return None


def _storage(u: Unit, run: RunCommand, mounts: list[At[str]], mount_opts: list[At[str]]) -> None:
    """Where the container's volumes are, its working directory, and whether it and what it writes
    outside them go when it exits (--rm) or it is a shell to work in by hand (-t)."""
    u.mounts = [At(m.value.split(":")[1], m.line) for m in mounts if m.value.count(":") >= 1]
    u.mounts += [
        At(t.group(1), m.line)
        for m in mount_opts
        if "tmpfs" not in m.value and (t := re.search(r"(?:target|dst|destination)=([^,]+)", m.value))
    ]
    workdir = run.has("-w", "--workdir")
    u.workdir = workdir.value if workdir is not None else None
    u.removed = run.has("--rm") is not None
    shell = not run.command or os.path.basename(run.command[0].text) in SHELLS
    tty = run.has("-t", "--tty")
    if shell and tty is not None:
        u.interactive = At("an interactive shell (-it)", tty.line)


def _training_program(command: list[Word]) -> At[str] | None:
    """The training program a container runs itself, named for it: `python train.py`, `python -m pkg.train`,
    `train` (SageMaker's entry point), `bash finetune.sh`."""
    at = program_at(command)
    word = command[at] if at is not None else (command[0] if command else None)
    if word is None or not TRAINING_NAME.search(os.path.basename(word.text)):
        return None
    return At(" ".join(w.text for w in command[: (at or 0) + 1]), word.line)


def _input_mount(mount: str, program: At[str] | None, workdir: str | None) -> str | None:
    """What a -v SRC:DST[:OPTS] volume brings in for the job to read, or None when it may take outputs."""
    src, dst, *opts = mount.split(":")
    dst = dst.rstrip("/") or "/"
    if "ro" in ",".join(opts).split(","):
        return f"{dst} (read-only)"
    if holds_data(dst) or holds_data(src):
        return f"{dst} (data)"
    runs = program is not None and f" {dst}/" in f" {program.value}"
    if runs and not (workdir and (workdir.rstrip("/") + "/").startswith(dst + "/")):
        return f"{dst} (the code it runs, with no -w that makes it the working directory)"
    return None


def _inputs_only(u: Unit, mounts: list[At[str]], mount_opts: list[At[str]]) -> At[str] | None:
    binds = [m for m in mounts if m.value.count(":") >= 1 and m.value.split(":")[1] != "/dev/shm"]
    if mount_opts or not binds:
        return None  # --mount volumes are not classified here: taken as places that may keep outputs
    found = [_input_mount(m.value, u.program, u.workdir) for m in binds]
    if any(f is None for f in found):
        return None
    return At(", ".join(f for f in found if f), binds[0].line)


def _work_kept(u: Unit, run: RunCommand, mounts: list[At[str]], mount_opts: list[At[str]]) -> None:
    """A training program run without a launcher, where it is told to write, and whether every volume only
    brings in what it reads (so what it writes stays in the container)."""
    u.program = None if u.launches else _training_program(run.command)
    if u.program is not None:
        u.outputs = script_outputs(run.command)
    u.inputs_only = _inputs_only(u, mounts, mount_opts)


def _docker_unit(run: RunCommand, env: dict[str, At[str]], source: str) -> Unit:
    u = Unit("docker", source, f"{run.engine} run", run.line, image=run.image)
    u.env = dict(env)
    for e in run.values("-e", "--env"):
        name, eq, value = e.value.partition("=")
        if eq:
            u.env[name] = At(value, e.line)
    u.launches = launches(run.command)
    held = holds_forever(command_text([w.text for w in run.command])) if run.command else None
    u.idles = At(held, run.command[-1].line) if held is not None else None
    u.trains = bool(u.launches)
    u.gpus = _gpu_count(run)
    u.gpus_all = _every_gpu(run, u.env)
    memory = run.has("-m", "--memory")
    if memory is not None and docker_bytes(memory.value) is not None:
        u.memory_limit = At(docker_bytes(memory.value) or 0, memory.line)
    ipc = run.has("--ipc")
    shm_size = run.has("--shm-size")
    mounts = run.values("-v", "--volume")
    mount_opts = run.values("--mount")
    host_shm = next((m for m in mounts if m.value.split(":")[1:2] == ["/dev/shm"]), None)
    tmpfs_shm = next((m for m in [*mount_opts, *run.values("--tmpfs")] if "/dev/shm" in m.value), None)
    if ipc is not None and ipc.value == "host":
        u.host_ipc = At(True, ipc.line)
        u.shm = At("host", ipc.line)
    elif host_shm is not None:
        u.shm = At("host", host_shm.line)
    elif shm_size is not None:
        size = docker_bytes(shm_size.value)
        u.shm_bytes = size
        u.shm = At("tiny" if size is not None and size < table.shm().warn_below_bytes else "memory", shm_size.line)
    elif tmpfs_shm is not None:
        u.shm = At("memory", tmpfs_shm.line)
    else:
        u.shm = At("default", run.line)
    u.persistent_volume = any(m.value.split(":")[1:2] != ["/dev/shm"] for m in mounts if ":" in m.value) or any(
        "tmpfs" not in m.value for m in mount_opts
    )
    _storage(u, run, mounts, mount_opts)
    _work_kept(u, run, mounts, mount_opts)
    privileged = run.has("--privileged")
    if privileged is not None and privileged.value != "false":
        u.privileged = At(True, privileged.line)
    network = run.has("--network", "--net")
    if network is not None and network.value == "host":
        u.host_network = At(True, network.line)
    for cap in run.values("--cap-add"):
        if cap.value.upper() in ("IPC_LOCK", "CAP_IPC_LOCK", "ALL"):
            u.ipc_lock = At(True, cap.line)
    user = run.has("-u", "--user")
    if user is not None and ids_out_of_range(user.value):
        u.structural.append(Structural("invalid_id", user.line, {"field": "--user", "value": user.value}))
    elif user is not None and user.value.split(":")[0] in ("0", "root"):
        u.root = At(f"--user {user.value}", user.line)
    elif user is None:
        u.root = At(f"no --user; {IMAGE_DECIDES}", run.line)
    return u


def _directive_value(tokens: list[str], i: int, names: tuple[str, ...]) -> str | None:
    tok = tokens[i]
    for name in names:
        if tok.startswith(name + "="):
            return tok.split("=", 1)[1]
        if tok == name and i + 1 < len(tokens):
            return tokens[i + 1]
        if len(name) == 2 and tok.startswith(name) and len(tok) > 2 and not tok.startswith("--"):
            return tok[2:]
    return None


def _count(text: str) -> int | None:
    last = text.split(":")[-1].split("(")[0]
    return int(last) if last.isdigit() else None


_DIRECTIVES = (
    ("nodes", ("--nodes", "-N")),
    ("gpus_per_node", ("--gpus-per-node",)),
    ("gpus_per_task", ("--gpus-per-task",)),
    ("gres", ("--gres",)),
    ("gpus", ("--gpus", "-G")),
    ("tasks_per_node", ("--ntasks-per-node",)),
    ("ntasks", ("--ntasks", "-n")),
    ("image", ("--container-image",)),
)


def _directive_tokens(line: str) -> list[str]:
    """#SBATCH arguments as sbatch reads them: a `#` starts a comment only at the start of a word,
    so a pyxis image `nvcr.io#nvidia/pytorch:24.01-py3` stays whole."""
    body = re.sub(r"(^|\s)#.*$", "", line[len("#SBATCH") :])
    try:
        return shlex.split(body)
    except ValueError:
        return body.split()


def sbatch_variables(text: str, first_line: int = 1) -> dict[str, At[str]]:
    """#SBATCH counts written as a shell variable (`--ntasks-per-node=${GPUS_PER_NODE}`): sbatch does not
    expand them, so the value comes from sbatch's command line; lint keeps the words to compare them."""
    found: dict[str, At[str]] = {}
    for n, raw in enumerate(text.split("\n"), start=first_line):
        line = raw.strip()
        if line and not line.startswith("#"):
            break
        tokens = _directive_tokens(line) if line.startswith("#SBATCH") else []
        for i in range(len(tokens)):
            for key, names in _DIRECTIVES:
                value = _directive_value(tokens, i, names)
                if value is not None and "$" in value:
                    found[key] = At(value, n)
    return found


def sbatch_directives(text: str, first_line: int = 1) -> dict[str, At[int]]:
    """#SBATCH lines up to the first command (where sbatch itself stops reading them)."""
    found: dict[str, At[int]] = {}
    for n, raw in enumerate(text.split("\n"), start=first_line):
        line = raw.strip()
        if not line or (line.startswith("#") and not line.startswith("#SBATCH")):
            continue
        if not line.startswith("#SBATCH"):
            break
        tokens = _directive_tokens(line)
        for i in range(len(tokens)):
            for key, names in _DIRECTIVES:
                value = _directive_value(tokens, i, names)
                if value is None or key == "image":
                    continue
                if key == "nodes":
                    count = _count(value.split("-")[-1])
                elif key == "gres":
                    gres = gres_gpus(At(value, n))
                    count, key = (gres.value if gres else None), "gpus_per_node"
                else:
                    count = _count(value)
                if count is not None:
                    found[key] = At(count, n)
    if "nodes" not in found and "ntasks" in found and "tasks_per_node" in found:
        # --ntasks with --ntasks-per-node and no --nodes: as many nodes as the tasks need (sbatch(1):
        # --ntasks-per-node is then the most tasks a node takes).
        tasks, per = found["ntasks"].value, max(1, found["tasks_per_node"].value)
        found["nodes"] = At(-(-tasks // per), found["ntasks"].line)
        found["nodes_implied"] = found["nodes"]
    _clip_nodes(found)
    nodes = found.get("nodes", At(1, 0)).value or 1
    if "tasks_per_node" not in found and "ntasks" in found:
        found["tasks_per_node"] = At(max(1, found["ntasks"].value // nodes), found["ntasks"].line)
    if "gpus_per_node" not in found and "gpus_per_task" in found:
        tasks = found.get("tasks_per_node", At(1, 0)).value
        found["gpus_per_node"] = At(found["gpus_per_task"].value * tasks, found["gpus_per_task"].line)
    if "gpus_per_node" not in found and "gpus" in found:
        found["gpus_per_node"] = At(found["gpus"].value // nodes, found["gpus"].line)
    return found


def _clip_nodes(found: dict[str, At[int]]) -> None:
    """Fewer tasks than nodes: Slurm gives the job as many nodes as tasks ("can't run 1 processes on 2 nodes,
    setting nnodes to 1", SchedMD/slurm src/sbatch/opt.c), so its steps run on those only."""
    nodes, tasks = found.get("nodes"), found.get("ntasks")
    if nodes is not None and tasks is not None and "tasks_per_node" not in found and 0 < tasks.value < nodes.value:
        found["nodes"] = found["nodes_clipped"] = At(tasks.value, tasks.line)


def late_directives(text: str, first_line: int = 1) -> list[At[str]]:
    """#SBATCH lines after the first command: sbatch stops reading directives there, so they ask for nothing
    (https://slurm.schedmd.com/sbatch.html: "sbatch will stop processing further #SBATCH directives once
    the first non-comment non-whitespace line has been reached")."""
    out: list[At[str]] = []
    started = False
    heredoc: str | None = None
    for n, raw in enumerate(text.split("\n"), start=first_line):
        line = raw.strip()
        if heredoc is not None:  # the body of another script (cat > job.sh <<EOF): its own directives
            heredoc = None if line == heredoc else heredoc
            continue
        if line and not line.startswith("#"):
            started = True
            m = _HEREDOC_START.search(raw)
            heredoc = m.group(1) if m else None
        elif started and line.startswith("#SBATCH"):
            out.append(At(line, n))
    return out


_NODES_DIRECTIVE = re.compile(r"^#SBATCH\s+(?:--nodes[= ]|-N\s*)(\d+)")


def sbatch_image(text: str, first_line: int = 1) -> At[str] | None:
    for n, raw in enumerate(text.split("\n"), start=first_line):
        line = raw.strip()
        if line.startswith("#SBATCH"):
            tokens = _directive_tokens(line)
            for i in range(len(tokens)):
                value = _directive_value(tokens, i, ("--container-image",))
                if value is not None:
                    return At(value, n)
        elif line and not line.startswith("#"):
            break
    return None


PREFIXES = {"exec", "sudo", "time", "nohup", "env", "command", "nice", "stdbuf", "!"}


def strip_prefixes(words: list[Word]) -> list[Word]:
    """`sudo -E podman run ...`, `exec env A=1 docker run ...` -> the command they run."""
    i = 0
    while i < len(words):
        text = words[i].text
        if os.path.basename(text) in PREFIXES:
            i += 1
            while i < len(words) and (words[i].text.startswith("-") or "=" in words[i].text.split("/")[0]):
                i += 1
            continue
        break
    return words[i:]


RUNTIME_SET = ("SLURM_", "SKYPILOT_", "PET_", "OMPI_COMM_WORLD_", "PMI_", "JOB_COMPLETION_INDEX")
"""Variables the scheduler or launcher sets on the nodes (Slurm's output variables, SkyPilot's, the
training operator's PET_*, Open MPI's and PMI's rank variables, an Indexed Job's index): a script's
`${SLURM_GPUS_ON_NODE:-8}` default is what runs elsewhere, not there."""


SLURM_COUNTS = {
    "SLURM_NNODES": "nodes",
    "SLURM_JOB_NUM_NODES": "nodes",
    "SLURM_NTASKS": "ntasks",
    "SLURM_NPROCS": "ntasks",
    "SLURM_NTASKS_PER_NODE": "tasks_per_node",
    "SLURM_GPUS_ON_NODE": "gpus_per_node",
}
"""Slurm's output variables that hold the job's own counts, the same on every node, and the directive
each comes from (https://slurm.schedmd.com/sbatch.html#SECTION_OUTPUT-ENVIRONMENT-VARIABLES)."""


def slurm_counts(text: str, first_line: int = 1) -> dict[str, At[str]]:
    """What those variables hold in a job the batch script's #SBATCH lines ask for: the counts the script
    states, so `WORLD_SIZE=$((SLURM_NNODES * 4))` is read as the number it is. A count the directives do
    not give (sbatch's command line may) stays unknown."""
    d = sbatch_directives(text, first_line)
    explicit = {k for k, v in d.items() if k in ("nodes", "ntasks", "gpus_per_node")}
    if "tasks_per_node" in d and "ntasks" not in d:
        explicit.add("tasks_per_node")
    if "ntasks" not in d and "nodes" in d and "tasks_per_node" in explicit:
        d["ntasks"] = At(d["nodes"].value * d["tasks_per_node"].value, d["tasks_per_node"].line)
        explicit.add("ntasks")
    return {name: At(str(d[key].value), d[key].line) for name, key in SLURM_COUNTS.items() if key in explicit}


_ARITH = re.compile(r"\$\(\((?P<expr>[^()]*(?:\([^()]*\)[^()]*)*)\)\)")
_ARITH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ARITH_READY = re.compile(r"^[\d\s+\-*/%()]{1,200}$")


def _integer(node: ast.AST) -> int:
    """+ - * / % over integers, as bash's $(( )) computes them (/ and % truncate toward zero)."""
    if isinstance(node, ast.Expression):
        return _integer(node.body)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _integer(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        a, b = _integer(node.left), _integer(node.right)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and b != 0:
            q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
            return q if not isinstance(node.op, ast.Mod) else a - q * b
    raise ValueError("not bash arithmetic lint can compute")


def arithmetic(text: str, value_of: Callable[[str], str | None]) -> str:
    """`$(( NNODES * 8 ))` computed where every name in it holds a number; left as written otherwise."""

    def one(m: re.Match[str]) -> str:
        def name(n: re.Match[str]) -> str:
            value = value_of(n.group(0))
            return value if value is not None and value.strip().isdigit() else n.group(0)

        expr = _ARITH_NAME.sub(name, m.group("expr"))
        if not _ARITH_READY.match(expr):
            return m.group(0)
        try:
            return str(_integer(ast.parse(expr.strip(), mode="eval")))
        except (SyntaxError, ValueError, RecursionError):
            return m.group(0)

    return _ARITH.sub(one, text) if "$((" in text else text


class Env:
    """The script's own variables as bash would have them at each point: scalars and arrays,
    values expanded when assigned (as bash does), `${X:-default}` taking the default when X is unset,
    `$(( ))` computed."""

    def __init__(self, runtime: dict[str, At[str]] | None = None) -> None:
        self.runtime = runtime or {}
        """What the scheduler sets the same on every node (Slurm's counts): read, never reported as set here."""
        self.scalars: dict[str, At[str]] = {}
        self.arrays: dict[str, list[Word]] = {}
        self.gpu_counted: set[int] = set()
        """Lines where a variable named for GPUs ($GPUS_PER_NODE, $NGPU) was expanded."""
        self.functions = Functions()
        self.files: dict[str, Word] = {}
        """Scripts this script writes out through a heredoc (`cat > run.sh <<EOF`), by file name."""

    def _note(self, w: Word) -> None:
        if _GPU_VAR.search(w.text):
            self.gpu_counted.add(w.line)

    def resolve(self, value: str, depth: int = 0) -> str:
        def one(m: re.Match[str]) -> str:
            name, index, default = m.group(1) or m.group(4), m.group(2), m.group(3)
            if name in self.arrays and (index in ("[@]", "[*]") or not index):
                items = self.arrays[name] if index else self.arrays[name][:1]
                return " ".join(w.text for w in items)
            if name in self.scalars and not index:
                return self.scalars[name].value
            if name in self.runtime and not index:
                return self.runtime[name].value
            if default is not None and name.startswith(RUNTIME_SET):
                return "${" + name + "}"  # the scheduler sets it where this runs: the default is not what runs
            if default is not None:
                return default.strip("\"'")
            return m.group(0)

        out = arithmetic(_VAR_FULL.sub(one, value), self._number)
        return self.resolve(out, depth + 1) if out != value and "$" in out and depth < 3 else out

    def _number(self, name: str) -> str | None:
        found = self.scalars.get(name) or self.runtime.get(name)
        return found.value if found is not None else None

    def assign(self, cmd: Command) -> None:
        if cmd.heredoc is not None and cmd.writes is not None:
            self.files[os.path.basename(cmd.writes)] = cmd.heredoc
        elif cmd.writes is not None and cmd.words and cmd.words[0].text in ("echo", "printf"):
            self._echoed(cmd)
        for name, w in cmd.assignments.items():
            self._note(w)
            if cmd.conditional and name in self.scalars and cmd.words == []:
                # `if [ $RANK -eq 0 ]; then MASTER_ADDR=localhost; fi` changes it on some nodes only: the
                # value every other run sees stands.
                continue
            self.scalars[name] = At(self.resolve(w.text), w.line)
            self.arrays.pop(name, None)
        for name, items in cmd.arrays.items():
            expanded: list[Word] = []
            for w in items:
                self._note(w)
                if w.splat is not None and w.splat in self.arrays:
                    expanded += self.arrays[w.splat]
                else:
                    expanded.append(Word(self.resolve(w.text), w.line))
            self.arrays[name] = expanded

    def _echoed(self, cmd: Command) -> None:
        """A script written out line by line (`echo "#SBATCH --nodes=2" > job.sh`, then `>> job.sh`): its text
        with each line at the line of the echo that wrote it, so findings in it point there."""
        assert cmd.writes is not None
        name = os.path.basename(cmd.writes)
        args = [w for w in cmd.words[1:] if not re.fullmatch(r"-[neE]+", w.text)]
        line = " ".join(self.resolve(w.text) for w in args).replace("\\n", "\n")
        before = self.files.get(name) if cmd.appends else None
        if before is None:
            self.files[name] = Word(line, cmd.line)
            return
        last = before.line + before.text.count("\n")
        self.files[name] = Word(before.text + "\n" * max(1, cmd.line - last) + line, before.line)

    def expand(self, words: list[Word]) -> list[Word]:
        """Arrays and unquoted multi-word variables become words (each array element keeps its own line)."""
        out: list[Word] = []
        for w in words:
            self._note(w)
            if w.splat is not None and w.splat in self.arrays and ("[" in w.text or not w.quoted):
                out += self.arrays[w.splat]
            elif w.splat is not None and w.splat in self.scalars and not w.quoted:
                value = self.scalars[w.splat]
                try:
                    parts = shlex.split(value.value)
                except ValueError:
                    parts = value.value.split()
                out += [filled(Word("", value.line), p) for p in parts]
            else:
                out.append(filled(w, self.resolve(w.text)))
        return out

    def flat(self) -> dict[str, At[str]]:
        return dict(self.scalars)


_GPU_VAR = re.compile(r"\$\{?\w*GPU", re.IGNORECASE)
_VAR_FULL = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9])(\[[^\]]*\])?(?:(?::?[-=])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)
"""${NAME}, ${NAME[@]}, ${NAME:-default} (a positional ${1:-default} too: the script's arguments are not
known, so what runs without them is read) and $NAME."""
_SLURM_NODES_VARS = ("$SLURM_JOB_NUM_NODES", "$SLURM_NNODES", "${SLURM_JOB_NUM_NODES}", "${SLURM_NNODES}")


@dataclass
class Scan:
    """What one pass over a script's commands collects, in script order."""

    docker: list[Unit] = field(default_factory=list)
    bare: list[tuple[Launch, dict[str, At[str]]]] = field(default_factory=list)
    images: list[At[str]] = field(default_factory=list)
    nested: list[Unit] = field(default_factory=list)
    steps: list[At[str]] = field(default_factory=list)
    """srun steps that start a program of their own in every task (one rank per task), no launcher."""
    script_nodes: list[At[int]] = field(default_factory=list)
    """The node counts those programs are told by their own flags (--num_nodes)."""
    ray_workers: list[At[int]] = field(default_factory=list)
    """Ray Train workers a script is told to start on GPUs (--num-workers N --use-gpu)."""
    ray_workers_told: list[At[int]] = field(default_factory=list)
    """Ray Train workers a script is told to start (--num-workers N) with nothing said of GPUs."""
    script_world: list[At[int]] = field(default_factory=list)
    """The world sizes srun steps' programs are told by their own flags (--world_size)."""
    script_devices: list[At[int]] = field(default_factory=list)
    """The devices per node srun steps' Lightning programs are told (--trainer.devices, trainer.devices=)."""
    script_spawns: list[At[int]] = field(default_factory=list)
    """The ranks srun steps' programs spawn themselves in each task (--gpus N beside their --world_size)."""


def read(
    text: str, source: str, notes: list[str] | None, first_line: int = 1, env: Env | None = None
) -> tuple[Scan, Env]:
    """What a script starts, command by command, with the variables as bash has them at each point
    (`env` seeds them: a SkyPilot task's envs and the variables SkyPilot sets)."""
    env = env or Env()
    found = commands(text, first_line, substitutions=True)
    if found.truncated_at is not None and notes is not None:
        notes.append(f"{source}:{found.truncated_at}: more than {MAX_COMMANDS} commands; the rest is not checked")
    scan = Scan()
    for cmd in found:
        _scan_command(cmd, env, source, notes, scan)
    # A function nothing here calls may still run (sourced, or called by name from outside): read it
    # once, with the variables as the script leaves them.
    for name, body in list(env.functions.items()):
        if name not in env.functions.called:
            env.functions.called.add(name)
            for cmd in body:
                _scan_command(cmd, env, source, notes, scan)
    for u in scan.docker:
        for launch in u.launches:
            _resolve_launch(launch, u.env)
    return scan, env


SYNTAX_REPAIRS = 3
"""Lines set aside, one per bash -n run, to read the rest of a script bash rejects."""


_NOT_LOCAL = ("unexpected EOF while looking for matching", "unexpected end of file")
"""bash's errors that are not about one line (an unclosed quote, a missing fi / done): what the rest of
the script means is a guess, so it is read as tree-sitter reads it."""


def _line_local(syntax: SyntaxProblem) -> bool:
    return not any(m in syntax.message for m in _NOT_LOCAL)


def _readable(text: str, syntax: SyntaxProblem | None) -> str:
    """The script with the lines bash rejects blanked (line numbers kept), so the commands around them are
    read: bash runs none of them until the error is fixed (syntax_error says so), and what they would
    run once it is fixed (a placeholder filled in, a stray `done` removed) is still judged. Only for an
    error of one line: after an unclosed quote, which words are code is a guess."""
    if syntax is None or not _line_local(syntax):
        return text
    lines = text.split("\n")
    blanked: set[int] = set()
    while syntax is not None and len(blanked) < SYNTAX_REPAIRS and 0 < syntax.line <= len(lines):
        if syntax.line in blanked:
            break
        blanked.add(syntax.line)
        # A line inside a continued command keeps the continuation (a lone backslash), so the command's
        # other lines stay one command.
        continued = syntax.line > 1 and lines[syntax.line - 2].rstrip().endswith("\\")
        lines[syntax.line - 1] = "\\" if continued and lines[syntax.line - 1].rstrip().endswith("\\") else ""
        syntax = bash_syntax("\n".join(lines))
    return "\n".join(lines)


def units(text: str, source: str, slurm: bool, notes: list[str] | None = None, first_line: int = 1) -> list[Unit]:
    syntax = bash_syntax(text) if first_line == 1 else None
    seeded = Env(slurm_counts(text, first_line)) if slurm else None
    scan, env = read(_readable(text, syntax), source, notes, first_line, seeded)
    out = scan.docker
    if slurm:
        job = _slurm_unit(text, source, first_line, env, scan)
        for d in out:
            if d.gpus is not None and d.gpus.value is None and job.gpus is not None and job.gpus.value is not None:
                d.gpus = At(job.gpus.value, d.gpus.line)  # every GPU of the node is what Slurm granted
        out.append(job)
    else:
        for launch, launch_env in scan.bare:
            out.append(Unit("shell", source, launch.tool, launch.line, launches=[launch], trains=True, env=launch_env))
        if not out and env.scalars:
            # No launcher here (a wrapper that exports settings, then runs python): its variables are still read.
            out.append(Unit("shell", source, "script", first_line, env=env.flat()))
        held = _node_held(text, first_line, scan)
        if held is not None:
            if not out:
                out.append(Unit("shell", source, "script", first_line, env=env.flat()))
            out[-1].idles = held
    if syntax is not None:
        _attach_syntax(out, syntax, text, "slurm" if slurm else "shell", source)
    broken = broken_continuations(text, first_line)
    if broken:
        target = out[-1] if slurm and out else _unit_at(out, broken[0].line)
        if target is None:
            target = Unit("slurm" if slurm else "shell", source, "script", first_line)
            out.append(target)
        target.structural += broken
    return out + scan.nested


_HEREDOC_START = re.compile(r"<<-?\s*[\"']?([A-Za-z_][A-Za-z0-9_]*)[\"']?")


_INLINE_COMMENT = re.compile(r"\s\\[ \t]+#.*$")
"""`--flag \\  # a note`: the backslash escapes the space, the rest is a comment, the command ends."""


def broken_continuations(text: str, first_line: int = 1) -> list[Structural]:
    """Backslashes meant to continue a command that do not: a backslash followed by a space or a comment
    on its line (bash reads an escaped space and ends the command at the newline), or a continued line
    followed by a blank line or a comment line (the command ends there). Reported where the next code
    line reads as the rest of the command (a flag, a variable, or indented under it)."""
    lines = text.split("\n")
    found: list[Structural] = []
    heredoc: str | None = None
    for i, raw in enumerate(lines):
        if heredoc is not None:
            if raw.strip() == heredoc:
                heredoc = None
            continue
        m = _HEREDOC_START.search(raw)
        if m and not raw.lstrip().startswith("#"):
            heredoc = m.group(1)
            continue
        if raw.lstrip().startswith("#"):
            continue
        body = raw.rstrip()
        inline = _INLINE_COMMENT.search(raw)
        if inline is not None and raw.count("'") % 2 == 0 and raw.count('"') % 2 == 0:
            gap, j = "a comment on the same line", i + 1
        elif not body.endswith("\\") or body.endswith("\\\\"):
            continue
        elif raw != body:
            gap = "a carriage return (Windows line ends)" if raw.endswith("\r") else "a space"
            j = i + 1
        else:
            gap, j = "", i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j].lstrip().startswith("#")):
                gap = gap or ("a blank line" if not lines[j].strip() else "a comment line")
                j += 1
            if not gap:
                continue
        following = lines[j] if j < len(lines) else ""
        if _continues(following, _command_start(lines, i)):
            ctx: Ctx = {"gap": gap, "next": following.strip()[:60], "next_line": j + first_line, "line": i + first_line}
            found.append(Structural("broken_continuation", i + first_line, ctx))
    return found


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _command_start(lines: list[str], i: int) -> str:
    """The first line of the command that line i continues."""
    while i > 0 and lines[i - 1].rstrip().endswith("\\"):
        i -= 1
    return lines[i]


def _continues(following: str, start: str) -> bool:
    """Whether a line reads as more arguments of the command begun on `start`."""
    text = following.strip()
    if not text:
        return False
    return text.startswith(("-", "$", '"$')) or _indent(following) > _indent(start)


def _unit_at(units_: list[Unit], line: int) -> Unit | None:
    """The unit whose command starts last at or before `line` (the command the broken line belongs to)."""
    before = [u for u in units_ if u.line <= line]
    return before[-1] if before else (units_[0] if units_ else None)


FUNCTION_DEPTH = 3


_STARTS_CONTAINER = re.compile(r"\b(?:docker|podman|nvidia-docker)\s+(?:container\s+)?run\b")


def shell_string(words: list[Word]) -> Word | None:
    """The script a command hands to a shell as a string: `bash -c 'STRING'` (-xc, -lc, -x -c), `eval WORDS`."""
    base = os.path.basename(words[0].text) if words else ""
    if base == "eval" and len(words) > 1:
        return Word(" ".join(w.text for w in words[1:]), words[1].line)
    if base in SHELLS:
        for j in range(1, len(words)):
            flags = words[j].text
            if not flags.startswith("-") or flags.startswith("--"):
                return None
            if "c" in flags[1:]:
                return words[j + 1] if j + 1 < len(words) else None
    return None


def _scan_command(cmd: Command, env: Env, source: str, notes: list[str] | None, scan: Scan, depth: int = 0) -> None:
    if cmd.substituted:
        # `CID=$(docker run -d ...)`: the container starts; what the subshell assigns does not outlive it.
        run = run_command(strip_prefixes(env.expand(cmd.words)))
        if run is not None:
            scan.docker.append(_docker_unit(run, env.flat(), source))
        return
    if cmd.defines is not None:
        env.functions[cmd.defines[0]] = cmd.defines[1]
        return
    env.assign(cmd)
    if not cmd.words:
        return
    words = _written_script_run(env.expand(cmd.words), env.files)
    head = strip_prefixes(words)
    body = env.functions.call(head[0].text, [w.text for w in head[1:]]) if head and depth < FUNCTION_DEPTH else None
    if body is not None:  # bash runs the body here, with the variables as they are now
        for inner in body:
            _scan_command(inner, env, source, notes, scan, depth + 1)
        return
    inner_script = shell_string(head)
    if inner_script is not None and depth < FUNCTION_DEPTH and _STARTS_CONTAINER.search(inner_script.text):
        # `bash -c "docker run ..."`, `eval "$DOCKER_CMD"`: the string is a script of its own, run here.
        for inner in commands(inner_script.text, inner_script.line, substitutions=True):
            _scan_command(inner, env, source, notes, scan, depth + 1)
        return
    doc = _submitted(cmd, words, env.files)
    if doc is not None:
        # `sbatch <<EOF ... EOF`, or `sbatch job.sh` of a script written out above: a batch script of its own,
        # with the outer variables.
        scan.nested += units(env.resolve(doc.text), source, slurm=True, notes=notes, first_line=doc.line)
        return
    run = run_command(strip_prefixes(words))
    if run is not None:
        scan.docker.append(_docker_unit(run, env.flat(), source))
        return
    scan.images += _container_images(words)
    found = launches(words, resolve=env.resolve, functions=env.functions)
    if not found and words and os.path.basename(words[0].text) == "srun":
        _srun_step(words, scan)
    if not found:
        _ray_train(words, scan)
    for launch in found:
        _resolve_launch(launch, env.flat())
        if launch.nproc is not None and launch.nproc.line in env.gpu_counted and launch.device_hint is None:
            launch.device_hint = At("gpu", launch.nproc.line)
        scan.bare.append((launch, env.flat()))


def _submitted(cmd: Command, words: list[Word], files: dict[str, Word]) -> Word | None:
    """The batch script an sbatch command submits, where this script holds its text."""
    if not words or os.path.basename(words[0].text) != "sbatch":
        return None
    if cmd.heredoc is not None:
        return cmd.heredoc
    return next((files[os.path.basename(w.text)] for w in words[1:] if os.path.basename(w.text) in files), None)


def _written_script_run(words: list[Word], files: dict[str, Word]) -> list[Word]:
    """`[srun ...] bash run.sh ARGS` or `./run.sh` of a script this one wrote out: read as `bash -c BODY`, so
    what it starts is judged where it runs (under srun, in every task)."""
    if not files:
        return words
    for i, w in enumerate(words):
        name = os.path.basename(w.text)
        shell = i > 0 and os.path.basename(words[i - 1].text) in SHELLS
        if name in files and (shell or w.text.startswith(("./", "/", "$"))):
            body = files[name]
            start = i - 1 if shell else i
            script = Word(body.text, body.line, literal=True)
            return [*words[:start], Word("bash", w.line), Word("-c", w.line), script, *words[i:]]
    return words


def _ray_train(words: list[Word], scan: Scan) -> None:
    workers = ray_train_workers(words)
    if workers is not None:
        scan.ray_workers.append(workers)
        return
    told = ray_train_workers(words, on_gpu_cluster=True)
    if told is not None:
        scan.ray_workers_told.append(told)


def _srun_step(words: list[Word], scan: Scan) -> None:
    """An srun step with no launcher that starts work of its own in every task: a program (one rank per
    task) or a Ray node (which takes the GPUs its node shows), unless the step asks for its own GPUs."""
    at = program_at(words[1:])
    program = words[1 + at] if at is not None else None
    line = " ".join(w.text for w in words[1:])
    ray = RAY_NODE.search(line) is not None
    if re.search(r"\bray\s+job\s+submit\b", line):
        program = None  # submitted to the Ray cluster: it runs where the Ray nodes are, not once per task
    options = words[1 : next((k for k, w in enumerate(words) if w is program), len(words))]
    if any(w.text.startswith(("--gres=gpu", "--gpus", "-G")) or w.text == "--gres" for w in options):
        return  # a step that asks for its own GPUs has them (srun's options, not the program's own flags)
    if program is not None:
        scan.steps.append(At(program.text, words[0].line))
        after = words[next(k for k, w in enumerate(words) if w is program) + 1 :]
        told, world, devices = script_nodes(after), script_world_size(after), script_devices(after)
        if devices is not None:
            scan.script_devices.append(devices)
        spawns = script_spawns(after)
        if spawns is not None:
            scan.script_spawns.append(spawns)
        if told is not None:
            scan.script_nodes.append(told)
        if world is not None:
            scan.script_world.append(world)
    elif ray:
        scan.steps.append(At("ray start", words[0].line))


def _container_images(words: list[Word]) -> list[At[str]]:
    """pyxis images: `--container-image=X` on any command, `--container-image X` on srun."""
    images = [At(w.text.split("=", 1)[1], w.line) for w in words if w.text.startswith("--container-image=")]
    if words and os.path.basename(words[0].text) == "srun":
        images += [At(nxt.text, nxt.line) for w, nxt in pairwise(words) if w.text == "--container-image"]
    return images


def _counts_left_to_sbatch(u: Unit, text: str, first_line: int) -> None:
    """#SBATCH counts written as variables: GPUs are asked for (how many, sbatch's command line says), and
    the tasks per node are kept as written, to compare with the launcher's ranks per node."""
    given = sbatch_variables(text, first_line)
    gpus = next((given[k] for k in ("gpus_per_node", "gpus", "gpus_per_task") if k in given), None)
    if "gres" in given and "gpu" in given["gres"].value:
        gpus = gpus or given["gres"]
    if u.gpus is None and gpus is not None:
        u.gpus = At(None, gpus.line)
    u.tasks_per_node_given = given.get("tasks_per_node")


def _slurm_unit(text: str, source: str, first_line: int, env: Env, scan: Scan) -> Unit:
    d = sbatch_directives(text, first_line)
    batch = re.search(r"^#SBATCH\b", text, re.MULTILINE) is not None
    what = "sbatch script" if batch else "srun script"
    u = Unit("slurm", source, what, first_line, launches=[b[0] for b in scan.bare], trains=bool(scan.bare))
    u.allocation_outside = not batch
    u.env = env.flat()
    if "gpus_per_node" in d:
        u.gpus = At(d["gpus_per_node"].value, d["gpus_per_node"].line)
    _counts_left_to_sbatch(u, text, first_line)
    u.nodes = d.get("nodes")
    u.nodes_what = "#SBATCH --ntasks / --ntasks-per-node" if "nodes_implied" in d else "#SBATCH --nodes"
    if "nodes_clipped" in d:
        u.nodes_what = "#SBATCH --ntasks: fewer tasks than --nodes, and Slurm sets the nodes to the tasks"
    late = late_directives(text, first_line)
    if late:
        u.structural.append(Structural("sbatch_directive_ignored", late[0].line, {"directive": late[0].value}))
    asked = next((m for m in (_NODES_DIRECTIVE.match(x.value) for x in late) if m), None)
    if u.nodes is None and asked is not None and int(asked.group(1)) > 1:
        # The job asks sbatch for nothing: one node, whatever the ignored line says.
        line = next(x.line for x in late if _NODES_DIRECTIVE.match(x.value))
        u.nodes, u.nodes_what = At(1, line), "sbatch's default: its #SBATCH --nodes comes after the first command"
    u.tasks_per_node = d.get("tasks_per_node")
    u.image = sbatch_image(text, first_line) or (scan.images[0] if scan.images else None)
    u.steps = scan.steps
    u.script_nodes = scan.script_nodes
    u.script_world = scan.script_world
    u.script_devices = scan.script_devices
    u.script_spawns = scan.script_spawns
    u.root = _remapped_root(text, first_line)
    u.structural += unset_reads(text, first_line)
    held = holds_forever(_code(text))
    if held is not None:
        u.idles = At(held, first_line + len(text.rstrip().split("\n")) - 1)
    return u


_REMAP_ROOT = re.compile(r"\benroot\s+start\b[^\n]*\s(?:--root|-r)\b|\bsrun\b[^\n]*\s--container-remap-root\b")
"""enroot start --root and pyxis's srun --container-remap-root map the user to root inside the container."""


def _remapped_root(text: str, first_line: int) -> At[str] | None:
    for n, line in enumerate(text.split("\n"), start=first_line):
        if not line.lstrip().startswith("#") and _REMAP_ROOT.search(line):
            return At("the container is asked to remap the user to root", n)
    return None


RAY_NODE = re.compile(r"\bray\s+start\b(?![^\n]*--num-gpus[= ]0\b)")
"""A Ray node takes every GPU its machine shows unless told --num-gpus=0."""


def _node_held(text: str, first_line: int, scan: Scan) -> At[str] | None:
    """A per-node launcher (run in a pod, container or allocation) that ends by waiting forever while it
    holds GPUs: a Ray node it started, or a GPU launcher it ran. The line is that of the waiting command."""
    code = _code(text)
    gpu_work = RAY_NODE.search(code) is not None or any(
        launch.tool in ("torchrun", "accelerate", "deepspeed") for launch, _ in scan.bare
    )
    held = holds_forever(code) if gpu_work else None
    if held is None:
        return None
    lines = text.rstrip().split("\n")
    closers = ("fi", "done", "}", "esac", "wait", "")
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip() not in closers), len(lines) - 1)
    return At(held, first_line + last)


def _code(text: str) -> str:
    """The script without its comment lines (#SBATCH directives included)."""
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith("#"))


def _attach_syntax(out: list[Unit], syntax: SyntaxProblem, text: str, area: str, source: str) -> None:
    """bash -n's error goes on the script's last unit of its own area, or on a new one when it has none (a
    docker run read from the script is a unit of the docker area, where the rule is not reported)."""
    target = next((u for u in reversed(out) if u.area == area), None) or Unit(area, source, "script", 1)
    message = syntax.message
    lines = text.split("\n")
    bad = lines[syntax.line - 1] if 0 < syntax.line <= len(lines) else ""
    placeholder = re.search(r"<[A-Za-z][^<>\n]*>", bad)
    if placeholder:  # templates ship `VAR=<fill me in>`, which bash reads as redirections
        message += f" (a placeholder left unfilled: {placeholder.group(0)})"
    target.syntax = At(message, syntax.line)
    if not any(u is target for u in out):
        out.append(target)


def _resolve_launch(launch: Launch, env: dict[str, At[str]]) -> None:
    if launch.nproc is not None and launch.device_hint is None and re.search(r"\$\{?\w*GPU", launch.nproc.value):
        # --nproc_per_node=$GPUS_PER_NODE: the script counts its ranks in GPUs.
        launch.device_hint = At("gpu", launch.nproc.line)
    for attr in ("nproc", "nnodes", "rdzv_endpoint", "master_addr", "node_rank", "rdzv_backend"):
        value = getattr(launch, attr)
        if value is not None and "$" in value.value:
            setattr(launch, attr, At(resolve(value.value, env), value.line))


__all__ = ["Word", "resolve", "sbatch_directives", "units"]
