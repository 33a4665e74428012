"""`launch --target slurm` in its three modes (submitting environment, pyxis, Apptainer/SingularityCE).

Neither pyxis nor Apptainer is packaged here: their scripts are checked by `bash -n`, by `ddp-doctor
lint` and by running them with recording stand-ins for srun/apptainer/the launched command. The
submitting-environment mode also runs for real on a two-node Slurm (tests/slurm/test_launch.py).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from ddp_doctor.commands.launch import SubmittingEnv, submitting_environment
from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.report import Status
from tests.conftest import run_cli
from tests.deploy.test_generated_scripts import RECORD, SCONTROL, SRUN, argv

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
MODES = {
    "venv": ["--env-setup", "source /opt/venvs/train/bin/activate"],
    "modules": ["--env-setup", "module load cuda/12.4", "--env-setup", "source ~/venv/bin/activate"],
    "pyxis": ["--image", IMAGE, "--container-runtime", "pyxis"],
    "pyxis-file": ["--image", "/images/pytorch.sqsh", "--container-runtime", "pyxis"],
    "apptainer": ["--image", IMAGE, "--container-runtime", "apptainer", "--data", "/datasets:/data:ro"],
    "apptainer-sif": ["--image", "./pytorch.sif", "--container-runtime", "apptainer"],
    "singularity": ["--image", IMAGE, "--container-runtime", "singularity"],
}
SHAPES = {
    "check": ["--nodes", "2", "--gpus-per-node", "4"],
    "check-cpu": ["--nodes", "2", "--gpus-per-node", "0", "--preflight"],
    "torchrun": ["--nodes", "4", "--cpus", "32", "--memory", "256g", "--partition", "gpu", "--time", "4:00:00"],
    "elastic": ["--nodes", "4", "--min-nodes", "2", "--preflight"],
    "ranks": ["--nodes", "2", "--gpus-per-node", "4", "--cpus", "16", "--ranks-per-task"],
    "watched": ["--nodes", "2", "--gpus-per-node", "4", "--watch", "--preflight", "live"],
}


def generate(tmp_path: Path, *flags: str, name: str = "job.sbatch") -> Path:
    cut = flags.index("--") if "--" in flags else len(flags)
    out = tmp_path / name
    proc = run_cli("launch", "--target", "slurm", *flags[:cut], "-o", str(out), *flags[cut:])
    assert proc.returncode == 0, proc.stderr
    return out


def _flags(mode: str, shape: str) -> list[str]:
    flags = [*MODES[mode], *SHAPES[shape]]
    if shape in ("torchrun", "elastic", "ranks", "watched"):
        flags += ["--script", "train.py", "--", "--lr", "3e-4"]
    return flags


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_is_valid_bash_and_lints_clean(mode: str, shape: str, tmp_path: Path) -> None:
    script = generate(tmp_path, *_flags(mode, shape))
    syntax = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=10, check=False)
    assert syntax.returncode == 0, syntax.stderr
    found = lint_file(str(script))
    assert found.kind == "slurm" and found.units
    bad = [f"{r.id}: {r.summary}" for r in found.results if r.status in (Status.FAIL, Status.WARN)]
    assert not bad, bad
    if shape != "ranks":  # lint does not yet see a `bash -c 'exec python "$0"'` task as training
        assert found.units[0].trains


def test_resources_come_only_from_flags(tmp_path: Path) -> None:
    bare = generate(tmp_path, "--env-setup", "true", "--gpus-per-node", "0", name="bare.sbatch").read_text()
    asked = [line.split("=")[0] for line in bare.splitlines() if line.startswith("#SBATCH")]
    assert asked == ["#SBATCH --job-name", "#SBATCH --nodes", "#SBATCH --ntasks-per-node", "#SBATCH --output"]
    assert "--cpus-per-task" not in bare.split("#SBATCH --output")[1]  # nor on the srun line
    assert "the cluster's defaults apply: CPUs (--cpus) and memory (--memory)" in bare
    given = generate(tmp_path, "--shm-size", "64g", *_flags("pyxis", "torchrun"), name="given.sbatch").read_text()
    for line in ("--cpus-per-task=32", "--mem=320G", "--partition=gpu", "--time=4:00:00", "--gpus-per-node=8"):
        assert f"#SBATCH {line}\n" in given
    # srun does not read sbatch's --cpus-per-task since Slurm 22.05: the step says it again.
    assert re.search(r"^srun --ntasks-per-node=1 --cpus-per-task=32 ", given, re.MULTILINE)
    ranks = generate(tmp_path, *_flags("venv", "ranks"), name="ranks.sbatch").read_text()
    assert "#SBATCH --ntasks-per-node=4\n" in ranks and "#SBATCH --cpus-per-task=4\n" in ranks
    assert re.search(r"^srun --ntasks-per-node=4 --cpus-per-task=4 --kill-on-bad-exit=1", ranks, re.MULTILINE)
    assert "torchrun " not in ranks.split("\nset ")[1]  # no torchrun in the steps


@pytest.mark.parametrize(
    ("image", "enroot"),
    [
        (IMAGE, "nvcr.io#nvidia/pytorch:24.05-py3"),
        ("docker.io/library/ubuntu:22.04", "library/ubuntu:22.04"),
        ("pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime", "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime"),
        ("localhost:5000/train:1", "localhost:5000#train:1"),
    ],
)
def test_pyxis_gets_enroots_registry_hash_form(image: str, enroot: str, tmp_path: Path) -> None:
    text = generate(tmp_path, "--image", image, "--container-runtime", "pyxis").read_text()
    assert f"--container-image={enroot}" in text


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--image", IMAGE], "--target slurm --image needs --container-runtime pyxis"),
        (["--container-runtime", "pyxis"], "--container-runtime pyxis needs --image"),
        (["--image", f"{IMAGE}@sha256:{'a' * 64}", "--container-runtime", "pyxis"], "not a digest"),
        (["--image", "/x/pytorch.sif", "--container-runtime", "pyxis"], "a SIF file is Apptainer's"),
        (["--env-setup", "true", "--ranks-per-task"], "--ranks-per-task needs --script"),
        (
            ["--env-setup", "true", "--ranks-per-task", "--script", "t.py", "--nodes", "4", "--min-nodes", "2"],
            "elastic",
        ),
        (
            ["--env-setup", "true", "--ranks-per-task", "--script", "t.py", "--cpus", "10", "--gpus-per-node", "4"],
            "multiple",
        ),
        (["--env-setup", "true", "--time", "4h"], "--time '4h' is not a Slurm time"),
        (["--env-setup", "true", "--partition", "gpu a100"], "--partition 'gpu a100'"),
        (["--env-setup", "source a\nsource b"], "one shell line per flag"),
    ],
)
def test_slurm_refusals_are_one_line_and_exit_2(flags: list[str], words: str) -> None:
    proc = run_cli("launch", "--target", "slurm", *flags)
    assert proc.returncode == 2, proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1 and words in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("target", "flags", "words"),
    [
        (
            "docker",
            ["--image", "i:1", "--container-runtime", "apptainer"],
            "--container-runtime: for --target slurm only",
        ),
        ("k8s", ["--image", "i:1", "--partition", "gpu"], "--partition: for --target slurm only"),
        ("compose", [], "--image is required for --target compose"),
    ],
)
def test_slurm_flags_elsewhere_are_refused(target: str, flags: list[str], words: str) -> None:
    proc = run_cli("launch", "--target", target, *flags)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr


def test_an_unquoted_yaml_time_is_refused_not_read_as_minutes(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes: 2\ntime: 4:00:00\nenv_setup: source venv/bin/activate\n")  # YAML 1.1: 14400
    proc = run_cli("launch", "--target", "slurm", "--spec", str(spec))
    assert proc.returncode == 2 and "time must be a quoted string" in proc.stderr, proc.stderr
    spec.write_text("nodes: 2\ntime: '4:00:00'\nenv_setup: [source venv/bin/activate]\npartition: gpu\n")
    text = generate(tmp_path, "--spec", str(spec), "--gpus-per-node", "0")
    assert "#SBATCH --time=4:00:00\n" in text.read_text() and "\nsource venv/bin/activate\n" in text.read_text()


def test_the_submitting_environment_is_written_down(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "activate").write_text("")
    assert submitting_environment({"VIRTUAL_ENV": str(venv)}) == SubmittingEnv(
        (f"source {venv}/bin/activate",), "VIRTUAL_ENV"
    )
    conda = {"CONDA_PREFIX": "/opt/conda/envs/train", "CONDA_EXE": "/opt/conda/bin/conda"}
    assert (found := submitting_environment(conda)) is not None and found.env_setup == (
        'eval "$(/opt/conda/bin/conda shell.bash hook)"',
        "conda activate /opt/conda/envs/train",
    )
    assert submitting_environment({"CONDA_PREFIX": "/p q"}) == SubmittingEnv(
        ("export PATH='/p q/bin':\"$PATH\"",), "CONDA_PREFIX"
    )
    assert submitting_environment({}) is None
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    proc = run_cli("launch", "--target", "slurm", env={**env, "VIRTUAL_ENV": str(venv)})
    assert proc.returncode == 0 and "# The environment, the venv active when this script was generated" in proc.stdout
    assert f"\nsource {venv}/bin/activate\nset -u" in proc.stdout


# -- the scripts run, with stand-ins ----------------------------------------------------------------

APPTAINER = (
    "#!/bin/sh\n"
    'if [ "$1" = pull ]; then : > "$2"; exit 0; fi\n'
    'shift; while [ "${1#-}" != "$1" ]; do [ "$1" = --bind ] && shift; shift; done\n'
    'printf "%s\\n" "$1" > "$RECORD_DIR/image.path"; shift; exec "$@"\n'
)
ENV_RECORD = (
    '#!/bin/sh\nenv | grep -E "^(RANK|LOCAL_RANK|WORLD_SIZE|MASTER_ADDR|MASTER_PORT)=" | sort > "$RECORD_DIR/env"\n'
)


def _bin(tmp_path: Path, **extra: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    tools = {"ddp-doctor": RECORD, "torchrun": RECORD, "srun": SRUN, "scontrol": SCONTROL, "apptainer": APPTAINER}
    for name, body in {**tools, "python": RECORD, **extra}.items():
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


SLURM_ENV = {
    "SLURM_JOB_NODELIST": "gpu-node-[07-08]",
    "SLURM_NODEID": "1",
    "SLURM_JOB_ID": "4242",
    "SLURM_PROCID": "5",
    "SLURM_LOCALID": "1",
    "SLURM_NTASKS": "8",
    "SLURM_NTASKS_PER_NODE": "4",
}


def _run(script: Path, bin_dir: Path, cwd: Path, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path or f"{bin_dir}:/usr/bin:/bin", "RECORD_DIR": str(cwd), "HOME": str(cwd), **SLURM_ENV}
    return subprocess.run(
        ["bash", str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_apptainer_pulls_once_and_runs_the_check_in_the_image(tmp_path: Path) -> None:
    script = generate(tmp_path, *_flags("apptainer", "check"))
    proc = _run(script, _bin(tmp_path), tmp_path)
    assert proc.returncode == 0, proc.stderr
    sif = tmp_path / "pytorch_24.05-py3.sif"
    assert sif.exists() and (tmp_path / "image.path").read_text().strip() == str(sif)
    got = argv(tmp_path, "ddp-doctor")
    assert got[:3] == ["check", "--nproc", "4"] and got[got.index("--rdzv-endpoint") + 1] == "gpu-node-07:29500"
    # node 1 writes its own report beside the job output; node 0's is the cluster report on stdout
    assert got[-2:] == ["--output", "/logs/ddp-doctor-check-4242-node1.txt"]


def test_srun_spawned_ranks_get_their_rank_from_slurm_and_the_words_literally(tmp_path: Path) -> None:
    flags = [*MODES["venv"], *SHAPES["ranks"], "--script", "my train.py", "--", "--note", "it's $HOME `id`"]
    script = generate(tmp_path, *flags)
    script.write_text(script.read_text().replace("source /opt/venvs/train/bin/activate", "true"))
    bin_dir = _bin(tmp_path)
    proc = _run(script, bin_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert argv(tmp_path, "python") == ["my train.py", "--note", "it's $HOME `id`"]
    (bin_dir / "python").write_text(ENV_RECORD)
    assert _run(script, bin_dir, tmp_path).returncode == 0
    assert (tmp_path / "env").read_text().splitlines() == [
        "LOCAL_RANK=1",
        "MASTER_ADDR=gpu-node-07",
        "MASTER_PORT=29500",
        "RANK=5",
        "WORLD_SIZE=8",
    ]


def test_a_failed_preflight_stops_the_script_with_its_exit_status(tmp_path: Path) -> None:
    failing = '#!/bin/sh\necho "✘ FAIL  env.env_vars  GLOO_SOCKET_IFNAME=ens9 matches no interface"\nexit 1\n'
    script = generate(tmp_path, *_flags("venv", "check-cpu"))
    script.write_text(script.read_text().replace("source /opt/venvs/train/bin/activate", "true"))
    proc = _run(script, _bin(tmp_path, **{"ddp-doctor": failing, "hostname": "#!/bin/sh\necho node7\n"}), tmp_path)
    assert proc.returncode == 1
    assert "node7: ✘ FAIL  env.env_vars  GLOO_SOCKET_IFNAME=ens9 matches no interface" in proc.stdout
    assert "node7: preflight ddp-doctor check --static exited 1" in proc.stdout
    assert "ddp-doctor preflight failed (exit 1): the job's own step did not start" in proc.stderr


def test_no_ddp_doctor_on_path_is_one_clear_line(tmp_path: Path) -> None:
    script = generate(tmp_path, "--env-setup", "true", "--gpus-per-node", "0")
    bin_dir = _bin(tmp_path)
    (bin_dir / "ddp-doctor").unlink()
    proc = _run(script, bin_dir, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "ddp-doctor launch: ddp-doctor is not on PATH in this job; "
        "regenerate the script with --env-setup 'source VENV/bin/activate'"
    )
