"""LaunchSpec -> `docker run` argv, printed as a small shell script with the why of each flag."""

from __future__ import annotations

from ddp_doctor.deploy.serialize import Expand, shell_lines, shell_word
from ddp_doctor.deploy.spec import PREFLIGHT_S, LaunchSpec, gib_text, host_path

WHY = {
    "--gpus": "hands the GPUs to the container through the NVIDIA Container Toolkit; without it torch sees no GPU",
    "--shm-size": "Docker's /dev/shm is 64 MB; DataLoader workers and NCCL's shared-memory transport need more "
    "(a Bus error / 'No space left on device' otherwise)",
    "--ipc": "--ipc=host shares the host's /dev/shm instead of a sized private one: simplest for NCCL, "
    "but the container can see the host's IPC objects",
    "--ulimit": "memlock=-1 lets NCCL / RDMA pin host memory; stack=64 MiB as NVIDIA's containers recommend",
    "--network": "--network host: ranks on other nodes must reach this node's rendezvous and NCCL ports",
    "--user": "run as an unprivileged user; files written to the mounts belong to that uid",
}
ROOT_USER = "runs as root (--allow-root): the job can write anything on the mounts, as root"
INSPECT_TRIES = 10
"""Reads of the container's state, a second apart, while podman still cleans it up ('stopped', not 'exited')."""
CID_FILE = Expand("${cid_file}")
NEW_CID_FILE = 'cid_file=$(mktemp -u "${TMPDIR:-/tmp}/ddp-doctor-cid.XXXXXX")'
STATUS_OF = f"""\
# status_of ENGINE PID CID_FILE: wait for the `run` started in the background (PID) and return the container's
# own exit status, read back from the engine (inspect), not the one `run` returns: docker's CLI against
# podman's API returns 0 for a failed container run with --rm, and podman 4 under load can return 127 for any
# container ("no such exit code"). So no --rm: the container (its id in CID_FILE) is removed here once its
# status is read. TERM and HUP are passed on to `run`, which passes them to the container; Ctrl-C reaches it
# directly. A script killed with SIGKILL leaves the stopped container behind: remove it with `docker rm NAME`.
status_of() {{
    engine=$1 pid=$2 cid_file=$3
    trap 'kill -TERM "$pid" 2>/dev/null || :' TERM
    trap 'kill -HUP "$pid" 2>/dev/null || :' HUP
    trap : INT
    rc=0
    wait "$pid" || rc=$?
    while [ "$rc" -gt 128 ] && kill -0 "$pid" 2>/dev/null; do  # a signal ended the wait, not the container
        rc=0
        wait "$pid" || rc=$?
    done
    trap - TERM HUP INT
    cid=$(cat "$cid_file" 2>/dev/null) || cid=
    rm -f "$cid_file"
    [ -n "$cid" ] || return "$rc"  # no container was made: run's own status and message
    state=
    for _ in {" ".join(str(i) for i in range(1, INSPECT_TRIES + 1))}; do
        state=$("$engine" inspect --format '{{{{.State.Status}}}} {{{{.State.ExitCode}}}}' "$cid" 2>/dev/null) || state=
        case $state in "stopped "*) sleep 1 ;; *) break ;; esac  # podman: stopped, its exit status not yet stored
    done
    "$engine" rm -f "$cid" >/dev/null 2>&1 || :
    case $state in "exited "*) return "${{state#exited }}" ;; esac
    return "$rc"
}}"""


def gpu_flag(spec: LaunchSpec) -> list[str]:
    if spec.gpus_per_node == 0:
        return []
    if spec.all_devices:
        return ["--gpus", "all"]
    if spec.devices:
        # The inner double quotes are part of the value: docker splits on commas otherwise.
        return ["--gpus", '"device=' + ",".join(spec.devices) + '"']
    return ["--gpus", str(spec.gpus_per_node)]


def argv(spec: LaunchSpec, engine: str = "docker", command: list[str] | None = None, role: str = "") -> list[str]:
    """The container's run line; `command` replaces the job's own (the preflight's check), `role` names it."""
    node_rank, master = "${NODE_RANK}", "${MASTER_ADDR}"
    name = Expand(f"{spec.name}{role}-node-{node_rank}") if spec.multi_node else spec.name + role
    out = [engine, "run", "--cidfile", CID_FILE, "--name", name]
    out += gpu_flag(spec)
    out += ["--ipc=host"] if spec.ipc_host else ["--shm-size", gib_text(spec.shm, "docker")]
    out += ["--ulimit", "memlock=-1", "--ulimit", "stack=67108864"]
    out += [
        "--cpus",
        str(spec.cpu_count),
        "--memory",
        gib_text(spec.memory + (0 if spec.ipc_host else spec.shm), "docker"),
    ]
    if spec.multi_node:
        out += ["--network", "host"]
    out += ["--user", f"{spec.uid}:{spec.gid}"]
    for m in (*spec.data, spec.log_mount(kubernetes=False)):
        source = host_path(m.source)
        volume = f"{source}:{m.target}" + (":ro" if m.read_only else "")
        out += ["--volume", Expand(volume) if isinstance(source, Expand) else volume]
    for key, value in spec.env:
        out += ["--env", f"{key}={value}"]
    out += [spec.image]
    out += command or spec.entrypoint(node_rank=node_rank, rdzv_host=master, rdzv_id=f"{spec.name}-${{RUN_ID}}")
    return out


def preflight(spec: LaunchSpec) -> list[str]:
    """The check in a container like the job's (same image, GPUs, /dev/shm, user, mounts), before it."""
    check = ["timeout", "-k", "5", str(PREFLIGHT_S - 5), *spec.preflight_command()]
    return [
        f"# Preflight: {' '.join(spec.preflight_command())} in the same image and settings first, at most {PREFLIGHT_S} s",
        "# (coreutils timeout in the image); a failure ends this script with the check's exit status.",
        NEW_CID_FILE,
        shell_lines(group_flags(argv(spec, command=check, role="-preflight"), spec.image)) + " &",
        'status_of docker "$!" "$cid_file"'
        + ' || { rc=$?; echo "ddp-doctor preflight failed (exit $rc): the job did not start" >&2; exit "$rc"; }',
    ]


def group_flags(flags: list[str], image: str) -> list[list[str]]:
    """[engine run], then each flag with its value, then the image and the command."""
    at = flags.index(image)
    groups, i = [flags[:2]], 2
    while i < at:
        takes_value = "=" not in flags[i] and i + 1 < at
        groups.append(flags[i : i + 2] if takes_value else [flags[i]])
        i += 2 if takes_value else 1
    groups.append(flags[at:])
    return groups


def render(spec: LaunchSpec) -> str:
    lines = ["#!/bin/sh", f"# ddp-doctor launch --target docker: {spec.shape}"]
    flags = argv(spec)
    present = {f.split("=")[0] for f in flags if f.startswith("--")}
    why = {**WHY, "--user": ROOT_USER} if spec.root else WHY
    lines += [f"# {flag}: {why}" for flag, why in why.items() if flag in present]
    lines.append(f"# {spec.image_needs}")
    lines.append("set -eu")
    if spec.multi_node:
        lines += [
            "# Run this script on every node, node 0 first: NODE_RANK=0..N-1, MASTER_ADDR = node 0's address,",
            "# RUN_ID the same on every node of one run.",
            ': "${NODE_RANK:?set NODE_RANK to this node\'s rank, 0 on the master}"',
            ': "${MASTER_ADDR:?set MASTER_ADDR to node 0\'s address (not localhost)}"',
            ': "${RUN_ID:?set RUN_ID to one value shared by every node}"',
        ]
    lines.append("mkdir -p " + shell_word(host_path(spec.log_mount(kubernetes=False).source)))
    lines.append(STATUS_OF)
    if spec.preflight:
        lines += preflight(spec)
    lines += [NEW_CID_FILE, shell_lines(group_flags(flags, spec.image)) + " &", 'status_of docker "$!" "$cid_file"']
    return "\n".join(lines) + "\n"
