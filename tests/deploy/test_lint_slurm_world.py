"""The world a Slurm job's launcher is told against the one the allocation gives, however the script
spells it: literals, variables, Slurm's own counts in shell arithmetic, arrays, functions with arguments,
`bash -c` strings, pyxis containers, and srun steps with fewer tasks than nodes. Each mismatch has a
twin that spells the same world right and must stay quiet."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.deploy.lint.scripts import arithmetic, slurm_counts

HEAD = "#!/bin/bash\n#SBATCH --job-name=train\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:8\n"
RDZV = "--rdzv_backend c10d --rdzv_endpoint $HEAD:29500"
WORLD_RULES = {"nnodes_mismatch", "world_size_conflict", "script_nodes_mismatch"}


def _rules(tmp_path: Path, text: str) -> dict[str, list[tuple[int, str]]]:
    path = tmp_path / "job.sbatch"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    out: dict[str, list[tuple[int, str]]] = {}
    for r in lint_file(str(path)).results:
        out.setdefault(r.id.split(".")[-1], []).append((r.evidence[0].line or 0, str(r.observed["severity"])))
    return out


CASES = {
    # torchrun's own docs example (docs/source/elastic/run.rst), its counts from variables set above it
    "torchrun docs example, variables": (
        (
            "NUM_NODES={n}\nNUM_TRAINERS=8\nsrun torchrun --nnodes=$NUM_NODES --nproc-per-node=$NUM_TRAINERS "
            "--max-restarts=3 --rdzv-id=$SLURM_JOB_ID --rdzv-backend=c10d --rdzv-endpoint=$HEAD:29500 train.py\n"
        ),
        "1",
        "2",
    ),
    "Slurm's node count in arithmetic": (
        "NNODES=$(( SLURM_NNODES {op} ))\nsrun torchrun --nnodes $NNODES --nproc_per_node 8 " + RDZV + " train.py\n",
        "* 2",
        "* 1",
    ),
    "a function given the node count as its argument": (
        (
            "launch() {{\n  torchrun --nnodes=$1 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=$2:29500 train.py\n}}\n"
            'export -f launch\nsrun bash -c "launch {n} $HEAD"\n'
        ),
        "1",
        "2",
    ),
    "a function called straight from the script": (
        "run_node() {{\n  local nodes=${{1:-1}}\n  srun torchrun --nnodes $nodes --nproc_per_node 8 "
        + RDZV
        + " train.py\n}}\n"
        "run_node {n}\n",
        "4",
        "2",
    ),
    "a pyxis container step in a bash -c string": (
        "srun --container-image=nvcr.io#nvidia/pytorch:24.01-py3 --container-mounts=/data:/data "
        'bash -c "torchrun --nnodes {n} --nproc_per_node 8 ' + RDZV + ' train.py"\n',
        "1",
        "$SLURM_NNODES",
    ),
    "srun with fewer tasks than the job's nodes": (
        "srun -n {n} torchrun --nnodes 2 --nproc_per_node 8 " + RDZV + " train.py\n",
        "1",
        "2",
    ),
    "accelerate's machines from Slurm's count, computed": (
        (
            "MACHINES=$((SLURM_JOB_NUM_NODES {op}))\nsrun accelerate launch --multi_gpu --num_machines $MACHINES "
            "--num_processes $((MACHINES * 8)) --machine_rank \\$SLURM_NODEID --main_process_ip $HEAD "
            "--main_process_port 29500 --rdzv_backend c10d train.py\n"
        ),
        "+ 1",
        "+ 0",
    ),
    "WORLD_SIZE for one rank per task, from Slurm's counts": (
        "#SBATCH --ntasks-per-node=8\nexport WORLD_SIZE=$((SLURM_NNODES * {n}))\nsrun python train.py\n",
        "4",
        "SLURM_NTASKS_PER_NODE",
    ),
    "a helper script the batch script writes out, then runs under srun": (
        "cat > run_node.sh <<'EOT'\n#!/bin/bash\ntorchrun --nnodes {n} --nproc_per_node 8 " + RDZV + " train.py\nEOT\n"
        "srun bash run_node.sh\n",
        "1",
        "$SLURM_NNODES",
    ),
    "Lightning's devices per node against srun's tasks per node (LightningCLI)": (
        "#SBATCH --ntasks-per-node=8\nsrun python train.py fit --trainer.devices {n} --trainer.num_nodes 2\n",
        "4",
        "8",
    ),
    "Lightning's devices per node against srun's tasks per node (Hydra)": (
        "#SBATCH --ntasks-per-node=8\nsrun python train.py trainer.devices={n} trainer.num_nodes=2\n",
        "1",
        "8",
    ),
    "the training script's own world size beside the world torchrun forms": (
        "srun torchrun --nnodes 2 --nproc_per_node 8 " + RDZV + " train.py --world_size {n}\n",
        "8",
        "16",
    ),
    "the training script's own world size, its GPU flag not srun's": (
        "#SBATCH --ntasks-per-node=8\nsrun python train.py --gpus 8 --world-size {n}\n",
        "8",
        "16",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_world_the_allocation_does_not_give_is_found_and_its_twin_is_not(tmp_path: Path, name: str) -> None:
    body, wrong, right = CASES[name]
    head = HEAD if not body.startswith("#SBATCH") else HEAD.replace("#SBATCH --ntasks-per-node=1\n", "")
    fill = {"n": wrong, "op": wrong}
    found = _rules(tmp_path, head + body.format(**fill))
    assert WORLD_RULES & set(found), (name, found)
    fill = {"n": right, "op": right}
    clean = _rules(tmp_path, head + body.format(**fill))
    assert not WORLD_RULES & set(clean), (name, clean)
    assert not [r for r, hits in clean.items() if any(sev == "error" for _, sev in hits)], (name, clean)


def test_fewer_tasks_than_nodes_gives_the_job_as_many_nodes_as_tasks(tmp_path: Path) -> None:
    """sbatch -N 2 -n 1: Slurm sets the nodes to 1, so torchrun --nnodes 2 waits for a node that never comes."""
    text = HEAD.replace("--ntasks-per-node=1", "--ntasks=1") + "srun torchrun --nnodes 2 --nproc_per_node 8 " + RDZV
    found = _rules(tmp_path, text + " train.py\n")
    assert found["nnodes_mismatch"] == [(6, "error")]
    assert "nnodes_mismatch" not in _rules(tmp_path, text.replace("--ntasks=1", "--ntasks=2") + " train.py\n")


def test_slurms_counts_come_from_the_directives_and_are_never_reported_as_set(tmp_path: Path) -> None:
    counts = slurm_counts(HEAD)
    assert {k: v.value for k, v in counts.items()} == {
        "SLURM_NNODES": "2",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_NTASKS": "2",
        "SLURM_NPROCS": "2",
        "SLURM_NTASKS_PER_NODE": "1",
        "SLURM_GPUS_ON_NODE": "8",
    }
    # A count the directives do not give (sbatch's command line may) stays unknown.
    assert set(slurm_counts("#!/bin/bash\n#SBATCH --gres=gpu:4\n")) == {"SLURM_GPUS_ON_NODE"}
    # Read where the script uses them, never judged as variables the script sets.
    path = tmp_path / "job.sbatch"
    path.write_text(HEAD + "srun torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 " + RDZV + " train.py\n")
    results = lint_file(str(path)).results
    assert not [r for r in results if "SLURM_" in r.summary and r.id.split(".")[-1].startswith("variable_")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$((2 * 8))", "16"),
        ("$(( (NODES + 1) * GPUS / 3 ))", "8"),  # (2 + 1) * 8 / 3, truncated as bash does
        ("$((-7 / 2))", "-3"),
        ("$((7 % 3))", "1"),
        ("$((NODES * UNKNOWN))", "$((NODES * UNKNOWN))"),  # a name with no number stays as written
        ("$((NODES / 0))", "$((NODES / 0))"),
        ("$((2 ** 4))", "$((2 ** 4))"),  # not computed: kept as written rather than guessed
        ("x$((NODES*GPUS))y", "x16y"),
    ],
)
def test_shell_arithmetic_is_computed_only_where_every_name_is_a_number(text: str, expected: str) -> None:
    values = {"NODES": "2", "GPUS": "8"}
    assert arithmetic(text, values.get) == expected


def test_a_script_of_srun_steps_without_sbatch_lines_is_judged_as_a_slurm_job(tmp_path: Path) -> None:
    """srun run from a login node allocates the job from its own options (srun(1)): the same rules as a
    batch script's steps, with no #SBATCH line in the file."""
    path = tmp_path / "launch.sh"
    path.write_text(
        "#!/bin/bash\nNNODES=2\nsrun --nodes=$NNODES --ntasks-per-node=4 --gres=gpu:4 \\\n"
        "  torchrun --nnodes=$NNODES --nproc_per_node=8 " + RDZV + " train.py\n"
    )
    found = {r.id: r for r in lint_file(str(path)).results if r.status.value in ("fail", "warn")}
    assert {"lint.slurm.tasks_per_node", "lint.slurm.nproc_exceeds_gpus"} <= set(found), found
    assert found["lint.slurm.tasks_per_node"].summary.startswith(f"{path}:3: srun script")
    path.write_text(
        "#!/bin/bash\nsrun --nodes=2 --ntasks-per-node=1 --gres=gpu:8 "
        "torchrun --nnodes=2 --nproc_per_node=8 " + RDZV + " train.py\n"
    )
    assert not [r for r in lint_file(str(path)).results if r.status.value == "fail"]


@pytest.mark.parametrize(
    ("nnodes", "mismatch"), [("--nnodes=2", "error"), ("--nnodes=$SLURM_NNODES", None), ("", "warning")]
)
def test_a_launcher_the_batch_script_runs_itself_is_told_the_allocations_nodes(
    tmp_path: Path, nnodes: str, mismatch: str | None
) -> None:
    """Run once without srun, it starts on the first node only (torchrun_without_srun); a node count it is told
    on top of that is still judged against the allocation. No count at all is a world of one node while the
    others idle (a warning): srun added alone would then start a world of its own on every node, so the node
    count is a fix of its own."""
    text = HEAD.replace("--nodes=2", "--nodes=4") + f"torchrun {nnodes} --nproc_per_node 8 {RDZV} train.py\n"
    found = _rules(tmp_path, text)
    assert found["torchrun_without_srun"] == [(6, "error")]
    assert found.get("nnodes_mismatch") == ([(6, mismatch)] if mismatch else None), found


def test_a_written_out_helper_is_read_where_it_runs_and_at_its_own_lines(tmp_path: Path) -> None:
    text = (
        HEAD + "cat <<EOF > ./step.sh\ntorchrun --nnodes 4 --nproc_per_node 8 " + RDZV + " train.py\nEOF\n"
        "chmod +x step.sh\nsrun ./step.sh\n"
    )
    assert _rules(tmp_path, text)["nnodes_mismatch"] == [(7, "error")]  # the torchrun line inside the heredoc
    # Written out but never run: nothing it starts is judged.
    assert "nnodes_mismatch" not in _rules(tmp_path, text.replace("srun ./step.sh\n", "srun hostname\n"))


_SUBMITS = """#!/bin/bash
NODES=3
GPUS=3
cat > job.sbatch <<EOT
#!/bin/bash
#SBATCH --nodes=$NODES
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:$GPUS
srun python main.py --nodes $NODES --gpus $GPUS --world_size {world}
EOT
sbatch job.sbatch
"""


@pytest.mark.parametrize(("world", "conflict"), [("8", True), ("9", False), ("3", True)])
def test_a_batch_script_written_out_then_submitted_and_the_ranks_its_program_spawns(
    tmp_path: Path, world: str, conflict: bool
) -> None:
    """`cat > job.sbatch <<EOT ... EOT; sbatch job.sbatch` is a batch script of its own; a program started once
    per node that is given its GPUs per node and a world size spawns one rank per GPU (3 nodes x 3 GPUs = 9)."""
    found = _rules(tmp_path, _SUBMITS.format(world=world))
    assert ("world_size_conflict" in found) is conflict, found
    if conflict:
        assert found["world_size_conflict"] == [(9, "warning")]


def test_a_world_size_that_counts_nodes_is_not_read_as_ranks(tmp_path: Path) -> None:
    """PyTorch's ImageNet example: with --multiprocessing-distributed, --world-size is the number of nodes."""
    text = HEAD + "srun python main.py --multiprocessing-distributed --world-size 2 --rank $SLURM_NODEID /data\n"
    assert "world_size_conflict" not in _rules(tmp_path, text.replace("--nodes=2", "--nodes=2"))
    text = HEAD.replace("--ntasks-per-node=1", "--ntasks-per-node=8") + "srun python main.py --world-size 2 /data\n"
    assert "world_size_conflict" in _rules(tmp_path, text)


def test_a_batch_script_written_out_line_by_line_with_echo_then_submitted(tmp_path: Path) -> None:
    """`echo "#SBATCH ..." > job.slurm`, more lines with >>, then `sbatch job.slurm`: the lines are read at the
    echo that wrote each, with the outer script's variables filled in."""
    text = (
        "#!/bin/bash\nnodes=2\n"
        'echo "#!/bin/bash" > job.slurm\n'
        'echo "#SBATCH --nodes=${nodes}" >> job.slurm  # the nodes\n'
        "\n"
        'echo "#SBATCH --ntasks-per-node=1" >> job.slurm\n'
        'echo "#SBATCH --gres=gpu:8" >> job.slurm\n'
        'echo "srun torchrun --nnodes 1 --nproc_per_node 8 train.py" >> job.slurm\n'
        "sbatch job.slurm\n"
    )
    assert _rules(tmp_path, text)["nnodes_mismatch"] == [(8, "error")]
    # Overwritten with > before it is submitted: only what is in the file then is submitted.
    again = text.replace("sbatch job.slurm\n", 'echo "#!/bin/bash" > job.slurm\nsbatch job.slurm\n')
    assert "nnodes_mismatch" not in _rules(tmp_path, again)


def test_an_srun_wrappers_gpus_may_come_from_the_allocation_it_runs_in(tmp_path: Path) -> None:
    step = "srun --ntasks-per-node=1 torchrun --nnodes 2 --nproc_per_node 8 " + RDZV + " train.py --backend nccl\n"
    assert "slurm_gpus_missing" not in _rules(tmp_path, "#!/bin/bash\n" + step)
    assert "slurm_gpus_missing" in _rules(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --exclusive\n" + step)


@pytest.mark.parametrize("program", ["python -m open_clip_train.main", "python3 -u -m pkg.train", "python -mpkg.train"])
def test_an_srun_step_running_a_python_module_is_one_rank_per_task(tmp_path: Path, program: str) -> None:
    """`python -m MODULE` runs the module as the program, as `python train.py` runs the script: an srun
    step of it starts one rank per task, and a GPU job of such steps that asks Slurm for no GPU is told."""
    head = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n#SBATCH --exclusive\nexport NCCL_DEBUG=INFO\n"
    assert _rules(tmp_path, head + f"srun --cpu_bind=v {program} --epochs 3\n")["slurm_gpus_missing"] == [
        (6, "warning")
    ]
    assert "slurm_gpus_missing" not in _rules(
        tmp_path, head.replace("--exclusive", "--gpus-per-node=8") + (f"srun {program}\n")
    )
    # A tool run through -m (installing, reporting) is no rank of the job.
    assert "slurm_gpus_missing" not in _rules(tmp_path, head + "srun python -m pip install -r req.txt\n")


@pytest.mark.parametrize(
    ("nodes", "step", "expected"),
    [
        ("2", "srun torchrun --nnodes 2 --nproc-per-node 8 {rdzv} t.py", None),  # the batch shell fills it in once
        ("2", "srun bash -c '{cmd}'", "error"),  # single quotes: each node fills in its own name
        ("2", 'srun bash -c "{cmd_escaped}"', "error"),
        ("2", 'srun bash -c "{cmd}"', None),  # double quotes: expanded before srun, the first node's name
        ("${NODES}", "srun bash -lc '{cmd}'", "warning"),  # several nodes unless NODES is 1
        ("1", "srun bash -c '{cmd}'", None),
    ],
)
def test_a_rendezvous_host_each_node_fills_in_with_its_own_name(
    tmp_path: Path, nodes: str, step: str, expected: str | None
) -> None:
    rdzv = "--rdzv-backend c10d --rdzv-endpoint $HOSTNAME:29500"
    cmd = f"torchrun --nnodes {nodes} --nproc-per-node 8 {rdzv} t.py"
    line = step.format(rdzv=rdzv, cmd=cmd, cmd_escaped=cmd.replace("$HOSTNAME", "\\$HOSTNAME"))
    head = f"#!/bin/bash\n#SBATCH --nodes={nodes}\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:8\n"
    found = _rules(tmp_path, head + line + "\n").get("rdzv_host_per_node")
    assert found == ([(5, expected)] if expected else None), found


@pytest.mark.parametrize(
    ("tasks", "nproc", "expected"),
    [
        ("${GPUS_PER_NODE}", "${GPUS_PER_NODE}", "warning"),  # V tasks x V ranks per node, unless V is 1
        ("${TASKS}", "${GPUS_PER_NODE}", None),  # two counts: nothing known of either
        ("1", "${GPUS_PER_NODE}", None),
    ],
)
def test_sbatch_counts_left_to_the_command_line(tmp_path: Path, tasks: str, nproc: str, expected: str | None) -> None:
    """sbatch does not expand ${VAR} in #SBATCH lines (the count comes from its command line): a GPU request
    so written is still a request, and tasks per node written as the launcher's own ranks per node multiply."""
    head = f"#!/bin/bash\n#SBATCH -N ${{NODES}}\n#SBATCH --gpus-per-node=${{GPUS_PER_NODE}}\n#SBATCH --ntasks-per-node={tasks}\n"
    step = f"srun bash -lc 'torchrun --nproc_per_node={nproc} --nnodes=${{NODES}} t.py --backend nccl'\n"
    found = _rules(tmp_path, head + step)
    assert found.get("tasks_per_node") == ([(4, expected)] if expected else None), found
    assert "slurm_gpus_missing" not in found
