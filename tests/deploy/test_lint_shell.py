"""Scripts read the way bash runs them: commands built in variables many lines earlier, functions run
where they are called (also from `srun bash -c`), quotes glued together; /dev/shm judged only where
something uses it; a CPU pod gets no GPU or NCCL findings."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddp_doctor.deploy.lint.engine import lint_file


def _lint(tmp_path: Path, name: str, text: str) -> dict[str, list[tuple[int, str]]]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    out: dict[str, list[tuple[int, str]]] = {}
    for r in lint_file(str(path)).results:
        out.setdefault(r.id.split(".")[-1], []).append((r.evidence[0].line or 0, str(r.observed["severity"])))
    return out


def test_command_built_in_variables_and_run_through_srun_args_much_later(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "train.sbatch",
        r"""
        #!/bin/bash
        #SBATCH --nodes 8
        #SBATCH --ntasks-per-node 1
        #SBATCH --gres gpu:4
        GPUS_PER_NODE=4
        MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
        LAUNCHER="
          torchrun \
          --nproc_per_node $GPUS_PER_NODE \
          --nnodes $SLURM_NNODES \
          --node_rank \$SLURM_PROCID \
          --rdzv_endpoint $MASTER_ADDR:6200 \
          --rdzv_backend c10d \
          "
        CMD="$LAUNCHER -m trainer train --config $1"
        SRUN_ARGS=" \
          --cpus-per-task $SLURM_CPUS_PER_TASK \
          --jobid $SLURM_JOB_ID \
          --wait 60 \
          "
        echo "$CMD"
        srun $SRUN_ARGS bash -c "$CMD"
        """,
    )
    assert not {r for r, hits in found.items() if any(sev == "error" for _, sev in hits)}, found


def test_quotes_glued_and_a_container_runtime_held_in_a_variable(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "titan.sh",
        r"""
        #!/bin/bash -x
        #SBATCH --nodes=2
        #SBATCH --gres=gpu:4
        SRUN_ARGS="--nodes=$SLURM_NNODES --gres=gpu:4 --kill-on-bad-exit=1"
        APPTAINER="singularity exec --nv --bind $PWD:/w $PWD/titan.sif"
        LAUNCHER="torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 --rdzv_backend c10d"
        srun $SRUN_ARGS $APPTAINER bash -c '
            exec '"$LAUNCHER -m torchtitan.train $@"
        """,
    )
    assert "torchrun_without_srun" not in found
    # 8 ranks on gpu:4, read through both quotes; the line is where the string that expands $LAUNCHER runs
    assert found["nproc_exceeds_gpus"] == [(8, "error")]


def test_functions_run_where_they_are_called(tmp_path: Path) -> None:
    called_later = """
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --gpus-per-node=4
        train() {
          torchrun --nnodes 2 --nproc-per-node $NPROC train.py
        }
        NPROC=8
        train
        """
    found = _lint(tmp_path, "a.sbatch", called_later)
    assert found["nproc_exceeds_gpus"] == [(7, "error")]  # $NPROC as it is at the call
    assert found["torchrun_without_srun"] == [(5, "error")]
    exported = """
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --gpus-per-node=8
        launch() {
          torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint "$HEAD:29500" "$@"
        }
        export -f launch
        srun bash -c "launch train.py"
        """
    assert "torchrun_without_srun" not in _lint(tmp_path, "b.sbatch", exported)


def test_tasks_per_node_with_any_launcher_that_starts_its_own_ranks(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "check.sbatch",
        """
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --ntasks-per-node=8
        #SBATCH --gpus-per-node=8
        srun --container-image nvcr.io#nvidia/pytorch:24.01-py3 bash -c 'exec ddp-doctor check --nproc 8 --nnodes 2'
        """,
    )
    assert found["tasks_per_node"] == [(3, "error")]
    one_task_per_gpu = """
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --ntasks-per-node=8
        #SBATCH --gpus-per-node=8
        srun python train.py
        """
    assert "tasks_per_node" not in _lint(tmp_path, "ok.sbatch", one_task_per_gpu)


POD = """
    apiVersion: v1
    kind: Pod
    metadata: {{name: p}}
    spec:
      containers:
      - name: t
        image: {image}
        command: [torchrun, {flags}, t.py]
        {resources}
    """


@pytest.mark.parametrize(
    ("image", "flags", "resources", "expected"),
    [
        ("img:1", "--nproc-per-node=1", "resources: {limits: {nvidia.com/gpu: 1}}", None),  # one rank, no workers
        ("img:1", "--nproc-per-node=4", "resources: {limits: {nvidia.com/gpu: 4}}", "error"),  # 4 GPU ranks
        ("img:1", "--nproc-per-node=1 --num_workers=8", "resources: {limits: {nvidia.com/gpu: 1}}", "error"),
        ("img:1-cpu", "--nproc-per-node=4", "", None),  # 4 gloo ranks: gloo does not use /dev/shm
        ("img:1-cpu", "--nproc-per-node=4 --workers=2", "", "error"),  # DataLoader workers on CPU do
        ("img:1", "--nproc-per-node=$(N)", "resources: {limits: {nvidia.com/gpu: 8}}", "warning"),  # uncounted
    ],
)
def test_dev_shm_only_where_something_uses_it(
    tmp_path: Path, image: str, flags: str, resources: str, expected: str | None
) -> None:
    text = POD.format(image=image, flags=", ".join(flags.split()), resources=resources)
    found = _lint(tmp_path, "p.yaml", text)
    assert (found["shm_default"][0][1] if "shm_default" in found else None) == expected


def test_cpu_pod_gets_no_gpu_findings(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "cpu.yaml",
        """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: cpu}
        spec:
          template:
            spec:
              containers:
              - name: t
                image: pytorch/pytorch:2.3.0-cpu
                command: [torchrun, --nproc-per-node=4, --backend=gloo, t.py]
        """,
    )
    gpu_rules = {"gpu_limit_missing", "runtime_class_missing", "shm_default", "nproc_below_gpus", "nproc_exceeds_gpus"}
    assert not gpu_rules & set(found), found


_IMAGE = "nvcr.io/nvidia/pytorch:24.01-py3"


@pytest.mark.parametrize(
    ("name", "script"),
    [
        ("captured id", f"CID=$(nvidia-docker run -d -v /data:/data {_IMAGE} python train.py)\ndocker logs -f $CID"),
        ("eval of a string", f'CMD="nvidia-docker run --rm -v /data:/data {_IMAGE} python train.py"\neval "$CMD"'),
        ("eval of words", f'CMD="nvidia-docker run --rm -v /data:/data {_IMAGE} python train.py"\neval $CMD'),
        ("bash -c", f'bash -c "nvidia-docker run --rm -v /data:/data {_IMAGE} python train.py"'),
        (
            "placeholder before it",
            f"DATA=<path to data>\nnvidia-docker run --rm -v $DATA:/data {_IMAGE} python train.py",
        ),
        ("a stray done before it", f"echo start\ndone\nnvidia-docker run --rm -v /data:/data {_IMAGE} python train.py"),
    ],
)
def test_a_container_started_wherever_bash_would_start_it(tmp_path: Path, name: str, script: str) -> None:
    """`$(docker run -d ...)`, `eval`, `bash -c` strings, and a docker run beside a line bash rejects (the
    syntax error is reported; the container is still judged as written). After an unclosed quote, which
    words are code is a guess: the script is read as tree-sitter reads it."""
    found = _lint(tmp_path, "run.sh", "#!/bin/bash\n" + script + "\n")
    assert "gpus_all" in found and "run_as_root" in found, (name, found)


def test_a_subshell_does_not_change_the_scripts_variables(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "run.sh",
        f"""
        #!/bin/bash
        NV_GPU=0,1
        X=$(NV_GPU=all; echo done)
        nvidia-docker run --rm -v /data:/data {_IMAGE} python train.py
        """,
    )
    assert "gpus_all" not in found, found


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ('GPUS=${1:-"all"}\ndocker run --rm --gpus device=$GPUS', True),  # run without arguments: every GPU
        ('GPUS=${1:-"0,1"}\ndocker run --rm --gpus device=$GPUS', False),
        (": ${GPUS:=${2:-all}}\ndocker run --rm --gpus $GPUS", True),
        ("NV_GPU=${NV_GPU:-all} nvidia-docker run --rm", True),
        ("NV_GPU=0 nvidia-docker run --rm", False),
    ],
)
def test_gpu_selection_read_through_argument_defaults(tmp_path: Path, script: str, expected: bool) -> None:
    found = _lint(tmp_path, "run.sh", f"#!/bin/bash\n{script} -v /data:/data {_IMAGE} python train.py\n")
    assert ("gpus_all" in found) is expected, found


@pytest.mark.parametrize(
    "command",
    [
        "python -m torch.distributed.launch --nproc_per_node=8 tools/train_net.py --config-file c.yaml OUTPUT_DIR /results",
        "tune run --nproc_per_node 8 full_finetune_distributed --config llama3/8B_full output_dir=/results",
        "torchrun --nproc_per_node 8 train.py trainer.default_root_dir=/results",
        "torchrun --nproc_per_node 8 finetuning.py --enable_fsdp --dist_checkpoint_root_folder=/results",
        "torchrun --nproc_per_node 8 train.py --save_path /results/model.pt",
    ],
)
def test_outputs_named_by_config_overrides(tmp_path: Path, command: str) -> None:
    """yacs `KEY VALUE` and Hydra/OmegaConf `key=value` overrides name where outputs go, like --output_dir."""
    found = _lint(
        tmp_path,
        "run.sh",
        f'#!/bin/bash\ndocker run --rm --gpus 8 --shm-size=8g -v /data:/data {_IMAGE} bash -c "{command}"\n',
    )
    assert "outputs_off_volume" in found, found
    kept = _lint(
        tmp_path,
        "run.sh",
        f'#!/bin/bash\ndocker run --rm --gpus 8 --shm-size=8g -v /data:/data -v /out:/results {_IMAGE} bash -c "{command}"\n',
    )
    assert "outputs_off_volume" not in kept, kept


@pytest.mark.parametrize("tool", ["pkill -f", "pgrep -f", "killall", "pidof"])
def test_a_command_that_looks_a_launcher_up_does_not_run_it(tmp_path: Path, tool: str) -> None:
    """`pkill -f torchrun || true` ends a launcher left from an earlier run; it starts none, so the node
    count is judged on the torchrun that really runs, not on this one's missing --nnodes."""
    head = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n"
    run = "srun torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint $H:29500 t.py\n"
    assert "nnodes_mismatch" not in _lint(tmp_path, "job.sbatch", head + f"{tool} torchrun || true\n" + run)
    assert "nnodes_mismatch" in _lint(
        tmp_path, "job.sbatch", head + "srun torchrun --nproc-per-node 8 t.py || true\n" + run
    )


@pytest.mark.parametrize(
    ("nodes", "nnodes", "expected"),
    [
        ("", "1:2", None),  # one node (sbatch's default), and --nnodes=1:2 forms its world on it alone
        ("", "2", "error"),  # the launcher itself needs a second node, which cannot reach this one's localhost
        ("", "2:4", "error"),
        ("#SBATCH --nodes=2\n", "1:2", "error"),  # two nodes: each would meet at its own localhost
    ],
)
def test_a_localhost_rendezvous_against_the_fewest_nodes_the_job_runs_on(
    tmp_path: Path, nodes: str, nnodes: str, expected: str | None
) -> None:
    step = "srun " if nodes else ""
    text = (
        f"#!/bin/bash\n#SBATCH --gres=gpu:4\n{nodes}{step}torchrun --nnodes={nnodes} --nproc_per_node=4 "
        "--rdzv_backend=c10d --rdzv_endpoint=localhost:6000 t.py\n"
    )
    found = _lint(tmp_path, "job.sbatch", text).get("master_addr_localhost")
    assert (found[0][1] if found else None) == expected, found
