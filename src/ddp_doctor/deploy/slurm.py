"""LaunchSpec -> an sbatch script that runs as written on a plain Slurm.

Three ways to run the tasks: in the submitting environment (a venv, conda or modules, set up by
the script's --env-setup lines), in an image through the pyxis SPANK plugin (srun
--container-image, enroot), or through Apptainer/SingularityCE (srun ... apptainer exec). One task
per node running torchrun (or ddp-doctor check) with its c10d rendezvous on the allocation's first
node, or with --ranks-per-task one task per rank, started by srun itself. CPUs, memory, partition
and time are asked for only when given: otherwise the cluster's defaults apply.
"""

from __future__ import annotations

import re

from ddp_doctor.deploy.serialize import Expand, shell_join, shell_lines, shell_word
from ddp_doctor.deploy.spec import PREFLIGHT_S, LaunchSpec, Mount, gib_text, host_path, is_image_file
from ddp_doctor.knowledge import exitcodes


def _preflight_task(spec: LaunchSpec) -> str:
    """Every node's preflight check (the static one takes about a second; bounded), its report in the job
    output prefixed with the node's name when it fails, one line per node either way. The outer bound in
    _preflight also covers srun waiting for the step's resources."""
    check = shell_join(spec.preflight_command())
    return (
        f"out=$(timeout {PREFLIGHT_S - 10} {check} 2>&1); rc=$?; host=$(hostname); "
        '[ "$rc" -eq 0 ] || printf "%s\\n" "$out" | sed "s/^/$host: /"; '
        f'echo "$host: preflight {check} exited $rc"; exit "$rc"'
    )


def _docker_to_enroot(image: str) -> str:
    """nvcr.io/nvidia/pytorch:24.05-py3 -> nvcr.io#nvidia/pytorch:24.05-py3: enroot's docker:// URI puts
    '#' after the registry ([USER@][REGISTRY#]IMAGE[:TAG], NVIDIA/enroot doc/cmd/import.md); without it
    enroot asks Docker Hub for an image named nvcr.io/nvidia/pytorch."""
    if is_image_file(image):
        return host_path(image)
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        if first in ("docker.io", "index.docker.io", "registry-1.docker.io"):
            return rest  # enroot's default registry is Docker Hub's
        return f"{first}#{rest}"
    return image


def _sif_name(image: str) -> str:
    """The file `apptainer pull` writes in the submit directory, named after the image."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", image.rsplit("/", 1)[-1]) + ".sif"


def _mounts(spec: LaunchSpec) -> list[tuple[str, Mount]]:
    return [(host_path(m.source), m) for m in (*spec.data, spec.log_mount(kubernetes=False))]


def _mount_word(prefix: str, spec: LaunchSpec) -> str:
    sources = _mounts(spec)
    text = prefix + ",".join(f"{src}:{m.target}" + (":ro" if m.read_only else "") for src, m in sources)
    return Expand(text) if any(isinstance(src, Expand) for src, _ in sources) else text


def _tasks_per_node(spec: LaunchSpec) -> int:
    return spec.ranks_per_node if spec.ranks_per_task else 1


def _cpus_per_task(spec: LaunchSpec) -> int | None:
    if spec.cpus is None:
        return None
    return spec.cpus // _tasks_per_node(spec)


def directives(spec: LaunchSpec) -> list[tuple[str, str]]:
    out = [("--job-name", spec.name), ("--nodes", spec.nnodes_arg.replace(":", "-"))]
    out.append(("--ntasks-per-node", str(_tasks_per_node(spec))))
    if spec.gpus_per_node:
        out.append(("--gpus-per-node", str(spec.gpus_per_node)))
    cpus = _cpus_per_task(spec)
    if cpus is not None:
        out.append(("--cpus-per-task", str(cpus)))
    if spec.memory_bytes is not None:
        # Pages a rank writes to /dev/shm are charged to the job's memory cgroup: a --shm-size given adds its room.
        out.append(("--mem", gib_text(spec.memory_bytes + (spec.shm_bytes or 0), "slurm")))
    if spec.partition:
        out.append(("--partition", spec.partition))
    if spec.time_limit:
        out.append(("--time", spec.time_limit))
    if _doctor_check(spec) and spec.multi_node:
        out.append(("--no-kill", ""))
    if spec.watch:
        # The job requeues itself on an infrastructure failure (_requeue); the requeued run appends to the output.
        out += [("--requeue", ""), ("--open-mode", "append")]
    # In the submit directory: Slurm does not create a missing --output directory, the job just fails.
    out.append(("--output", "%x-%j.out"))
    return out


def _doctor_check(spec: LaunchSpec) -> bool:
    """A doctor on every node reports across them (`ddp-doctor check`, or the script under `ddp-doctor run`):
    node 0's must outlive a failed node to name it."""
    return spec.script is None or spec.watch


def _container(spec: LaunchSpec) -> tuple[list[list[str]], list[str]]:
    """(srun flag groups, words before the task's command) for the spec's runtime."""
    runtime = spec.container_runtime
    if runtime == "pyxis":
        return [
            [f"--container-image={_docker_to_enroot(spec.image)}"],
            [_mount_word("--container-mounts=", spec)],
            ["--no-container-remap-root"],
        ], []
    if runtime in ("apptainer", "singularity"):
        words = [runtime, "exec"] + (["--nv"] if spec.gpus_per_node else [])
        return [], [*words, "--bind", _mount_word("", spec), Expand("$image")]
    return [], []


def _step_flags(spec: LaunchSpec) -> list[str]:
    flags = ["srun", f"--ntasks-per-node={_tasks_per_node(spec)}"]
    cpus = _cpus_per_task(spec)
    if cpus is not None:
        # srun no longer reads sbatch's SLURM_CPUS_PER_TASK (Slurm 22.05 RELEASE_NOTES): the step says it again.
        flags.append(f"--cpus-per-task={cpus}")
    if _doctor_check(spec) and spec.multi_node:
        flags.append("--no-kill")  # node 0 outlives a failed node and writes the cluster report
    else:
        flags.append("--kill-on-bad-exit=1")  # one failed rank ends the step instead of leaving the others waiting
    return flags


def _task_command(spec: LaunchSpec) -> list[str]:
    """The command each task runs; per-task variables ($SLURM_NODEID, $SLURM_PROCID) expand inside the task."""
    if spec.ranks_per_task:
        script = (
            "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS "
            'LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE; exec python "$0" "$@"'
        )
        return ["bash", "-c", script, spec.script or "", *spec.script_args]
    if spec.script is None:
        inner = shell_join(spec.entrypoint(node_rank="$SLURM_NODEID", rdzv_host="$RDZV_HOST", rdzv_id="$SLURM_JOB_ID"))
        if not spec.multi_node:
            return ["bash", "-c", f"exec {inner}"]
        # Node 0's cluster report goes to the job output; every other node's own report to a file beside it.
        report = _task_log_dir(spec) + "/ddp-doctor-check-$SLURM_JOB_ID-node$SLURM_NODEID.txt"
        return [
            "bash",
            "-c",
            f'report=(); [ "$SLURM_NODEID" = 0 ] || report=(--output "{report}"); exec {inner} "${{report[@]}}"',
        ]
    if spec.watch:
        return _watched(spec)
    return spec.entrypoint(node_rank="", rdzv_host="${head_node}", rdzv_id="${SLURM_JOB_ID}")


def _watched(spec: LaunchSpec) -> list[str]:
    """torchrun under `ddp-doctor run` (one per node; it finds its nodes and node 0 from Slurm's variables):
    node 0's report of every node goes to the job output, each node's evidence to its own directory in the
    logs (a requeued run gets a new one), every other node's own report beside its evidence (DIR.txt: `run`
    checks that --output's directory exists before it makes the run directory)."""
    argv = spec.entrypoint(node_rank="$SLURM_NODEID", rdzv_host="$RDZV_HOST", rdzv_id="$SLURM_JOB_ID")
    cut = argv.index("--")
    evidence = _task_log_dir(spec) + "/ddp-doctor-run-$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}-node$SLURM_NODEID"
    doctor = shell_join([*argv[:cut], "--run-dir", Expand(evidence)])
    report = f'report=(); [ "$SLURM_NODEID" = 0 ] || report=(--output "{evidence}.txt"); '
    return ["bash", "-c", f'{report}exec {doctor} "${{report[@]}}" -- {shell_join(argv[cut + 1 :])}']


def _task_log_dir(spec: LaunchSpec) -> str:
    """The logs directory as a task sees it: the mount's target in a container, the host path without one."""
    logs = spec.log_mount(kubernetes=False)
    if spec.container_runtime:
        return logs.target
    return logs.source if logs.source.startswith("/") else "$PWD/" + logs.source.removeprefix("./")


def _needs(spec: LaunchSpec) -> str:
    if spec.script is None or spec.watch:
        return "ddp-doctor"
    return "python" if spec.ranks_per_task else "torchrun"


def _where(spec: LaunchSpec) -> str:
    if spec.container_runtime == "pyxis":
        return f"in {spec.image} through pyxis + enroot (srun --container-image)"
    if spec.container_runtime:
        return f"in {spec.image} through {spec.container_runtime} exec"
    return "in the submitting environment"


def _header(spec: LaunchSpec) -> list[str]:
    lines = [f"# ddp-doctor launch --target slurm: {spec.shape}, {_where(spec)}", f"# {spec.image_needs}"]
    if spec.ranks_per_task:
        lines += [
            "# One task per rank, started by srun: RANK, LOCAL_RANK and WORLD_SIZE come from SLURM_PROCID,",
            "# SLURM_LOCALID and SLURM_NTASKS; MASTER_ADDR is the first node of the allocation. No torchrun.",
        ]
    else:
        lines += [
            "# One task per node; torchrun starts the ranks and meets the other nodes at the c10d",
            "# rendezvous on the first node of the allocation.",
        ]
    defaults = [
        what
        for what, given in (("CPUs (--cpus)", spec.cpus), ("memory (--memory)", spec.memory_bytes))
        if given is None
    ]
    if defaults:
        lines.append(f"# Not given to launch, so the cluster's defaults apply: {' and '.join(defaults)}.")
    return lines


def _setup(spec: LaunchSpec) -> list[str]:
    if spec.env_setup:
        source = {"VIRTUAL_ENV": "the venv", "CONDA_PREFIX": "the conda environment"}.get(spec.env_from)
        why = f"{source} active when this script was generated" if source else "from --env-setup"
        lines = ["set -eo pipefail", f"# The environment, {why}; srun passes it to every task.", *spec.env_setup]
        lines.append("set -u  # only now: activate scripts and `module` read variables that may be unset")
    else:
        lines = ["set -euo pipefail"]
    if not spec.image:
        tool = _needs(spec)
        lines.append(
            f'command -v {tool} >/dev/null || {{ echo "ddp-doctor launch: {tool} is not on PATH in this job; '
            "regenerate the script with --env-setup 'source VENV/bin/activate'\" >&2; exit 2; }"
        )
    lines += [
        "mkdir -p " + shell_word(host_path(spec.log_mount(kubernetes=False).source)),
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
    ]
    if spec.ranks_per_task:
        lines.append(f"export MASTER_ADDR=$head_node MASTER_PORT={spec.rdzv_port}")
    else:
        lines.append("export RDZV_HOST=$head_node")
    lines += [f"export {k}={shell_join([v])}" for k, v in spec.env]
    if spec.container_runtime in ("apptainer", "singularity"):
        if is_image_file(spec.image):
            lines.append("image=" + shell_word(host_path(spec.image)))
        else:
            # Pulled once into the submit directory (shared by the nodes) rather than by every task at once.
            lines.append("image=" + shell_word(Expand("${PWD}/" + _sif_name(spec.image))))
            lines.append(
                f'[ -f "$image" ] || {spec.container_runtime} pull "$image" ' + shell_word(f"docker://{spec.image}")
            )
    return lines


def _step(flags: list[list[str]], command: list[str]) -> str:
    """One srun line per decision; a `bash -c` script stays one single-quoted word."""
    groups = [g for g in flags if g]
    if command[:2] == ["bash", "-c"]:
        script = "'" + command[2].replace("'", "'\\''") + "'"
        rest = shell_join(command[3:])
        return shell_lines(groups) + " \\\n    bash -c " + script + (" " + rest if rest else "")
    return shell_lines([*groups, command])


def _preflight(spec: LaunchSpec, container_flags: list[list[str]], prefix: list[str]) -> list[str]:
    flags = [["timeout", "-k", "5", str(PREFLIGHT_S), "srun", "--ntasks-per-node=1"], *container_flags]
    return [
        (
            f"# Preflight: {shell_join(spec.preflight_command())} on every node before the job's own step, at most "
            f"{PREFLIGHT_S} s;"
        ),
        "# a node that fails it ends the job with the check's exit status (1 a failure, 124 out of time).",
        "preflight_start=$SECONDS",
        _step([*flags, prefix] if prefix else flags, ["bash", "-c", _preflight_task(spec)])
        + ' || { rc=$?; echo "ddp-doctor preflight failed (exit $rc): the job\'s own step did not start" >&2; '
        'exit "$rc"; }',
        'echo "ddp-doctor preflight passed on every node in $((SECONDS - preflight_start)) s"',
    ]


def render(spec: LaunchSpec) -> str:
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {flag}={value}" if value else f"#SBATCH {flag}" for flag, value in directives(spec)]
    lines += _header(spec)
    lines += _setup(spec)
    container_flags, prefix = _container(spec)
    if spec.preflight:
        lines += _preflight(spec, container_flags, prefix)
    flags = [_step_flags(spec), *container_flags]
    if prefix:
        flags.append(prefix)
    if not spec.watch:
        lines.append(_step(flags, _task_command(spec)))
        return "\n".join(lines) + "\n"
    lines += ["rc=0", _step(flags, _task_command(spec)) + " || rc=$?", *_requeue(spec), 'exit "$rc"']
    return "\n".join(lines) + "\n"


REQUEUES = 3
"""At most this many requeues of one job, then its failure stands."""


def _requeue(spec: LaunchSpec) -> list[str]:
    """With the verdict's infrastructure code, requeue the job without the node node 0's report blames.

    A running job's ExcNodeList cannot be changed ("Job is no longer pending execution"): the job is held
    first (requeuehold) and released after; the requeue ends this script with SIGTERM, ignored for those
    three calls. The report is read with sed: the batch host may have no Python (a container job)."""
    infra = exitcodes.code("infrastructure")
    logs = shell_word(host_path(spec.log_mount(kubernetes=False).source))
    report = logs + '"/ddp-doctor-run-$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}-node0/report.json"'
    return [
        f"# ddp-doctor run's verdict {infra}: the node or the network failed. Requeue the job (at most {REQUEUES} times)",
        "# without the node the report blames; any other status ends the job with it.",
        f'if [ "$rc" -eq {infra} ] && [ "${{SLURM_RESTART_COUNT:-0}}" -lt {REQUEUES} ]; then',
        f'    bad=$(sed -n \'s/.*"failed_node": "\\([^"]*\\)".*/\\1/p\' {report} 2>/dev/null | head -n1 || true)',
        "    prev=$(scontrol show job \"$SLURM_JOB_ID\" | grep -o 'ExcNodeList=[^ ]*' | cut -d= -f2 || true)",
        '    [ -z "$prev" ] || [ "$prev" = "(null)" ] || bad="$prev${bad:+,$bad}"',
        '    echo "ddp-doctor: infrastructure failure on ${bad:-an unknown node}; requeued without it" >&2',
        "    trap '' TERM",
        '    scontrol requeuehold "$SLURM_JOB_ID"',
        '    [ -z "$bad" ] || scontrol update JobId="$SLURM_JOB_ID" ExcNodeList="$bad"',
        '    scontrol release "$SLURM_JOB_ID"',
        "fi",
    ]
