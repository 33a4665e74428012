"""A launcher's own options written after the training script: torchrun, accelerate launch and the
deepspeed runner hand every word after the script to the script, so they never read them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ddp_doctor.deploy.lint.engine import lint_file


def _found(tmp_path: Path, name: str, text: str) -> dict[str, list[str]]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    out: dict[str, list[str]] = {}
    for r in lint_file(str(path)).results:
        out.setdefault(r.id.split(".")[-1], []).append(r.summary)
    return out


def test_torchrun_really_hands_its_options_after_the_script_to_the_script(tmp_path: Path) -> None:
    """The fact the rule rests on, from a real torchrun: one rank starts, and the script gets the option."""
    script = tmp_path / "train.py"
    script.write_text("import os, sys\nprint(os.environ['WORLD_SIZE'], sys.argv[1:])\n")
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--master-port", "0"]
    proc = subprocess.run(
        [*torchrun, str(script), "--nproc-per-node", "2"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "['--nproc-per-node',", "'2']"]


def test_the_deepspeed_and_accelerate_parsers_give_the_words_after_the_script_to_it() -> None:
    deepspeed_runner = pytest.importorskip("deepspeed.launcher.runner")
    args = deepspeed_runner.parse_args(["train.py", "--hostfile=hostfile", "--num_nodes=4", "--num_gpus=8"])
    assert (args.hostfile, args.num_nodes, args.num_gpus) == ("/job/hostfile", -1, -1)
    assert args.user_args == ["--hostfile=hostfile", "--num_nodes=4", "--num_gpus=8"]
    launch = pytest.importorskip("accelerate.commands.launch")
    args = launch.launch_command_parser().parse_args(["train.py", "--num_processes", "8"])
    assert args.num_processes is None and args.training_script_args == ["--num_processes", "8"]


@pytest.mark.parametrize(
    ("command", "flags"),
    [
        (
            "deepspeed train.py --hostfile=hostfile --num_nodes=4 --num_gpus=8 --deepspeed ds.json",
            "--hostfile, --num_nodes, --num_gpus",
        ),
        ("torchrun train.py --nproc_per_node 8 --nnodes 2", "--nproc_per_node, --nnodes"),
        ("python -m torch.distributed.run train.py --nproc-per-node=4", "--nproc-per-node"),
        ("accelerate launch train.py --num_processes 8 --mixed_precision bf16", "--num_processes"),
    ],
)
def test_world_options_after_the_script_are_an_error(tmp_path: Path, command: str, flags: str) -> None:
    found = _found(tmp_path, "run.sh", f"#!/bin/bash\n{command}\n")
    (summary,) = found["launcher_flags_after_script"]
    assert f"options {flags} come after the training script train.py" in summary


def test_a_module_run_with_m_is_the_script_too(tmp_path: Path) -> None:
    found = _found(tmp_path, "run.sh", "#!/bin/bash\ntorchrun --standalone -m trainer.main --nproc_per_node=8\n")
    (summary,) = found["launcher_flags_after_script"]
    assert "options --nproc_per_node come after the training script trainer.main" in summary


@pytest.mark.parametrize(
    "command",
    [
        # the launcher's own options before the script; the script's flags of the same meaning after it
        "torchrun --nproc_per_node 8 --nnodes 1 train.py --nnodes 1",
        "deepspeed --num_gpus 8 train.py --num_gpus 8 --deepspeed ds.json",
        "accelerate launch --num_processes 8 train.py --output_dir out",
        "torchrun --nproc_per_node 8 -m trainer.main --nnodes 1",  # one node: torchrun's default anyway
        "torchrun --nnodes 2 --nproc_per_node 8 --module trainer.main --lr 1e-4",
        # options no launcher of these has, after the script
        "torchrun --nproc_per_node 8 train.py --num_nodes 1 --world_size 8 --local_rank 0",
        # detectron2's launcher is the script itself: its flags come after it
        "python tools/train_net.py --num-gpus 8 --num-machines 1",
    ],
)
def test_no_finding_when_the_launcher_reads_its_own_options(tmp_path: Path, command: str) -> None:
    assert "launcher_flags_after_script" not in _found(tmp_path, "run.sh", f"#!/bin/bash\n{command}\n")


def test_options_after_the_script_no_longer_count_as_the_launchers(tmp_path: Path) -> None:
    """Before, `torchrun train.py --nnodes 2` was read as a launcher of two nodes; now it is one node's
    torchrun with the default, and the node count check sees what torchrun really does."""
    found = _found(
        tmp_path,
        "train.sbatch",
        """
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --ntasks-per-node=1
        #SBATCH --gpus-per-node=8
        srun torchrun train.py --nnodes 2 --nproc_per_node 8
        """,
    )
    assert "launcher_flags_after_script" in found, found
