"""Shell scripts and Slurm batch scripts -> Units: one per `docker|podman run`, one per bare
torchrun / ddp-doctor command, and for an sbatch script one for the job as a whole."""

from __future__ import annotations

import re
import shlex

from ddp_doctor.deploy.lint.commandline import RunCommand, launches, run_command
from ddp_doctor.deploy.lint.model import At, Launch, Unit
from ddp_doctor.deploy.lint.quantity import docker_bytes
from ddp_doctor.deploy.lint.shellparse import MAX_COMMANDS, Word, commands

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


def _docker_unit(run: RunCommand, env: dict[str, At[str]], source: str) -> Unit:
    u = Unit("docker", source, f"{run.engine} run", run.line, image=run.image)
    u.env = dict(env)
    for e in run.values("-e", "--env"):
        name, eq, value = e.value.partition("=")
        if eq:
            u.env[name] = At(value, e.line)
    u.launches = launches(run.command)
    u.trains = bool(u.launches)
    u.gpus = _gpu_count(run)
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
        u.shm = At("tiny" if size is not None and size < 2**30 else "memory", shm_size.line)
    elif tmpfs_shm is not None:
        u.shm = At("memory", tmpfs_shm.line)
    else:
        u.shm = At("default", run.line)
    u.persistent_volume = any(m.value.split(":")[1:2] != ["/dev/shm"] for m in mounts if ":" in m.value) or any(
        "tmpfs" not in m.value for m in mount_opts
    )
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
    if user is not None and user.value.split(":")[0] in ("0", "root"):
        u.root = At(f"--user {user.value}", user.line)
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


def sbatch_directives(text: str) -> dict[str, At[int]]:
    """#SBATCH lines up to the first command (where sbatch itself stops reading them)."""
    found: dict[str, At[int]] = {}
    for n, raw in enumerate(text.split("\n"), start=1):
        line = raw.strip()
        if not line or (line.startswith("#") and not line.startswith("#SBATCH")):
            continue
        if not line.startswith("#SBATCH"):
            break
        try:
            tokens = shlex.split(line[len("#SBATCH") :], comments=True)
        except ValueError:
            continue
        for i in range(len(tokens)):
            for key, names in (
                ("nodes", ("--nodes", "-N")),
                ("gpus_per_node", ("--gpus-per-node",)),
                ("gres", ("--gres",)),
                ("gpus", ("--gpus", "-G")),
                ("tasks_per_node", ("--ntasks-per-node",)),
            ):
                value = _directive_value(tokens, i, names)
                if value is None:
                    continue
                if key == "nodes":
                    count = _count(value.split("-")[-1])
                elif key == "gres":
                    gpu = next((g for g in value.split(",") if g.startswith("gpu")), None)
                    count, key = (_count(gpu) if gpu and ":" in gpu else (1 if gpu else None)), "gpus_per_node"
                else:
                    count = _count(value)
                if count is not None:
                    found[key] = At(count, n)
    if "gpus_per_node" not in found and "gpus" in found:
        nodes = found.get("nodes", At(1, 0)).value or 1
        found["gpus_per_node"] = At(found["gpus"].value // nodes, found["gpus"].line)
    return found


def units(text: str, source: str, slurm: bool, notes: list[str] | None = None) -> list[Unit]:
    env: dict[str, At[str]] = {}
    out: list[Unit] = []
    bare: list[tuple[Launch, dict[str, At[str]]]] = []
    images: list[At[str]] = []
    found = commands(text)
    if found.truncated_at is not None and notes is not None:
        notes.append(f"{source}:{found.truncated_at}: more than {MAX_COMMANDS} command lines; the rest is not checked")
    for cmd in found:
        env.update({k: At(w.text, w.line) for k, w in cmd.assignments.items()})
        run = run_command(cmd.words)
        if run is not None:
            out.append(_docker_unit(run, env, source))
            continue
        for w in cmd.words:
            if w.text.startswith("--container-image="):
                images.append(At(w.text.split("=", 1)[1], w.line))
        for launch in launches(cmd.words):
            _resolve_launch(launch, env)
            bare.append((launch, dict(env)))
    for u in out:
        for launch in u.launches:
            _resolve_launch(launch, u.env)
    if slurm:
        d = sbatch_directives(text)
        u = Unit("slurm", source, "sbatch script", 1, launches=[b[0] for b in bare], trains=bool(bare), env=dict(env))
        if "gpus_per_node" in d:
            u.gpus = At(d["gpus_per_node"].value, d["gpus_per_node"].line)
        u.nodes = d.get("nodes")
        u.tasks_per_node = d.get("tasks_per_node")
        u.image = images[0] if images else None
        out.append(u)
    else:
        for launch, launch_env in bare:
            out.append(Unit("shell", source, launch.tool, launch.line, launches=[launch], trains=True, env=launch_env))
    return out


def _resolve_launch(launch: Launch, env: dict[str, At[str]]) -> None:
    for attr in ("nproc", "nnodes", "rdzv_endpoint", "master_addr"):
        value = getattr(launch, attr)
        if value is not None and "$" in value.value:
            setattr(launch, attr, At(resolve(value.value, env), value.line))


__all__ = ["Word", "resolve", "sbatch_directives", "units"]
