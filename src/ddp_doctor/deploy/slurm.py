"""LaunchSpec -> an sbatch script: one srun task per node, torchrun's c10d rendezvous on the
allocation's first node. The image runs through the pyxis/enroot SPANK plugin (--container-image)."""

from __future__ import annotations

from ddp_doctor.deploy.serialize import Expand, shell_join, shell_lines, shell_word
from ddp_doctor.deploy.spec import LaunchSpec, gib_text, host_path


def directives(spec: LaunchSpec) -> list[tuple[str, str]]:
    out = [("--job-name", spec.name), ("--nodes", spec.nnodes_arg.replace(":", "-")), ("--ntasks-per-node", "1")]
    if spec.gpus_per_node:
        out.append(("--gpus-per-node", str(spec.gpus_per_node)))
    out += [
        ("--cpus-per-task", str(spec.cpu_count)),
        ("--mem", gib_text(spec.memory + spec.shm, "slurm")),
        # In the submit directory: Slurm does not create a missing --output directory, the job just fails.
        ("--output", "%x-%j.out"),
    ]
    return out


def srun_argv(spec: LaunchSpec) -> list[list[str]]:
    sources = [(host_path(m.source), m) for m in (*spec.data, spec.log_mount(kubernetes=False))]
    mounts = ",".join(f"{src}:{m.target}" + (":ro" if m.read_only else "") for src, m in sources)
    mount_flag = f"--container-mounts={mounts}"
    head = [
        ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"],
        [f"--container-image={spec.image}"],
        [Expand(mount_flag) if any(isinstance(src, Expand) for src, _ in sources) else mount_flag],
        ["--no-container-remap-root"],
    ]
    if spec.script is None:
        # Single quotes: SLURM_NODEID differs per task, so it must expand inside each task, not here.
        inner = shell_join(spec.entrypoint(node_rank="$SLURM_NODEID", rdzv_host="$RDZV_HOST", rdzv_id="$SLURM_JOB_ID"))
        return [*head, ["bash", "-c", f"exec {inner}"]]
    return [*head, spec.entrypoint(node_rank="", rdzv_host="${head_node}", rdzv_id="${SLURM_JOB_ID}")]


def render(spec: LaunchSpec) -> str:
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {flag}={value}" for flag, value in directives(spec)]
    lines += [
        f"# ddp-doctor launch --target slurm: {spec.shape}",
        f"# {spec.image_needs}",
        "# One task per node; torchrun starts the ranks and meets the other nodes at the c10d",
        "# rendezvous on the first node of the allocation. --container-image needs pyxis + enroot.",
        "set -euo pipefail",
        "mkdir -p " + shell_word(host_path(spec.log_mount(kubernetes=False).source)),
        'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
        "export RDZV_HOST=$head_node",
    ]
    lines += [f"export {k}={shell_join([v])}" for k, v in spec.env]
    groups = srun_argv(spec)
    if spec.script is None:
        *flags, cmd = groups
        lines.append(shell_lines(flags) + " \\\n    " + "bash -c " + "'" + cmd[2].replace("'", "'\\''") + "'")
    else:
        lines.append(shell_lines([*groups[:-1], groups[-1]]))
    return "\n".join(lines) + "\n"
