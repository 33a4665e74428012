"""MPI jobs on Kubernetes: mpirun -np against the slots of the hostfile the MPI operator writes, a launcher
that holds GPUs but runs no rank, and whether the operator ends the workers when the launcher is done
(cleanPodPolicy). Each finding has a twin that spells the job right and must stay quiet."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddp_doctor.deploy.lint.engine import lint_file
from tests.conftest import FIXTURES

CORPUS = FIXTURES / "lint-corpus"

MPIJOB = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: nccl}
spec:
  slotsPerWorker: SLOTS
  EXTRA
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: l
            image: "img:1"
            command: LAUNCHER_COMMAND
            LAUNCHER_GPUS
    Worker:
      replicas: WORKERS
      template:
        spec:
          containers:
          - name: w
            image: "img:1"
            WORKER_COMMAND
            resources: {limits: {nvidia.com/gpu: SLOTS}}
"""


MPIRUN = '[mpirun, -np, "NP", MPIFLAGS/opt/all_reduce_perf, -g, "1"]'


def _found(tmp_path: Path, **fill: str) -> dict[str, list[tuple[int, str]]]:
    values = {"SLOTS": "1", "EXTRA": "runPolicy: {cleanPodPolicy: Running}", "NP": "2", "MPIFLAGS": ""}
    values |= {"WORKERS": "2", "LAUNCHER_GPUS": "", "WORKER_COMMAND": ""} | fill
    text = MPIJOB.replace("LAUNCHER_COMMAND", fill.get("LAUNCHER_COMMAND", MPIRUN))
    for key, value in values.items():
        text = text.replace(key, value)
    path = tmp_path / "mpijob.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    out: dict[str, list[tuple[int, str]]] = {}
    for r in lint_file(str(path)).results:
        out.setdefault(r.id.split(".")[-1], []).append((r.evidence[0].line or 0, str(r.observed["severity"])))
    return out


@pytest.mark.parametrize(
    ("fill", "expected"),
    [
        ({}, None),  # 2 workers x 1 slot, -np 2
        ({"NP": "4", "SLOTS": "2"}, None),
        ({"NP": "4"}, "error"),  # Open MPI: 'There are not enough slots available in the system'
        ({"NP": "4", "MPIFLAGS": "--oversubscribe, "}, None),
        ({"NP": "4", "MPIFLAGS": "--map-by, 'slot:OVERSUBSCRIBE', "}, None),
        ({"NP": "4", "EXTRA": "mpiImplementation: Intel"}, "warning"),  # Hydra places the extra ranks anyway
        ({"NP": "1"}, "warning"),  # one worker's slots, and its GPU, stay idle
        ({"NP": "4", "MPIFLAGS": "-H, 'a:2,b:2', "}, None),  # its own hosts, not the operator's hostfile
        ({"NP": "3", "EXTRA": "runLauncherAsWorker: true"}, None),  # the launcher's slot is in the hostfile too
    ],
)
def test_mpirun_np_against_the_operators_hostfile(tmp_path: Path, fill: dict[str, str], expected: str | None) -> None:
    found = _found(tmp_path, **fill).get("mpi_slots_mismatch")
    assert found == ([(15, expected)] if expected else None), found


@pytest.mark.parametrize(
    ("np", "expected"),
    [
        ("2", None),  # 2 workers x 1 slot: the program's -n 100 is its iteration count, not mpirun's -n
        ("4", "error"),
        ("1", "warning"),
    ],
)
def test_mpirun_reads_its_options_up_to_the_program(tmp_path: Path, np: str, expected: str | None) -> None:
    """`mpirun [options] <program> [<args>]`: options with values (-x NAME, --mca KEY VALUE, --bind-to X) and
    without (--tag-output) come before the program; nccl-tests' own -n (iterations) and -f (size factor) after it
    are the program's, neither a rank count nor a hostfile."""
    command = (
        f'[/opt/openmpi/bin/mpirun, --allow-run-as-root, --tag-output, -np, "{np}", -x, PATH, --mca, pml, "^cm",'
        ' --bind-to, none, /opt/nccl-tests/all_reduce_perf, -b, "8", -f, "2", -g, "1", -n, "100"]'
    )
    found = _found(tmp_path, LAUNCHER_COMMAND=command).get("mpi_slots_mismatch")
    assert found == ([(15, expected)] if expected else None), found


def test_a_launcher_that_runs_no_rank_holds_its_gpu_idle(tmp_path: Path) -> None:
    gpu = "resources: {limits: {nvidia.com/gpu: 1}}"
    assert _found(tmp_path, LAUNCHER_GPUS=gpu)["nproc_below_gpus"] == [(16, "warning")]
    assert "nproc_below_gpus" not in _found(tmp_path, LAUNCHER_GPUS=gpu, EXTRA="runLauncherAsWorker: true", NP="3")
    assert "nproc_below_gpus" not in _found(tmp_path)
    # Real files: an MPIJob's launcher and an MPI TrainingRuntime's (runLauncherAsNode: false), 1 GPU each.
    assert lint_ids(CORPUS / "runai-mpi-tf-benchmarks-mpijob.yaml") >= {"nproc_below_gpus", "mpi_slots_mismatch"}
    assert "nproc_below_gpus" in lint_ids(CORPUS / "odh-osu-mpi-runtime-gpu.yaml")


def lint_ids(path: Path) -> set[str]:
    return {r.id.split(".")[-1] for r in lint_file(str(path)).results}


@pytest.mark.parametrize(
    ("policy", "held"),
    [
        ("runPolicy: {cleanPodPolicy: Running}", False),
        ("runPolicy: {cleanPodPolicy: All}", False),
        ("runPolicy: {cleanPodPolicy: None}", True),
        ("suspend: false", True),  # the operator's default is None: the workers stay after the launcher is done
    ],
)
def test_idle_workers_are_ended_only_by_a_clean_pod_policy(tmp_path: Path, policy: str, held: bool) -> None:
    for command in ("command: [/usr/sbin/sshd, -De]", "command: [sh, -c, 'sleep infinity']"):
        found = _found(tmp_path, EXTRA=policy, WORKER_COMMAND=command)
        assert ("gpus_held" in found) is held, (policy, command)


def test_words_run_without_a_shell_are_one_command(tmp_path: Path) -> None:
    # Folded YAML puts `; sleep infinity` inside the program's last argument: no shell ever runs it.
    folded = '[mpirun, -np, "2", python, t.py, "--x=1 echo done; sleep infinity"]'
    gpu = "resources: {limits: {nvidia.com/gpu: 1}}"
    assert "gpus_held" not in _found(tmp_path, LAUNCHER_COMMAND=folded, LAUNCHER_GPUS=gpu, EXTRA="suspend: false")
    assert "gpus_held" in _found(
        tmp_path, LAUNCHER_COMMAND="[sh, -c, 'mpirun -np 2 t.py; sleep infinity']", LAUNCHER_GPUS=gpu
    )
    # A shell after an entrypoint wrapper is still the shell that runs the script.
    wrapped = "command: [/usr/local/bin/uid_entrypoint.sh, /bin/bash, -c, 'mkdir -p /tmp/k && /usr/sbin/sshd -D']"
    assert "gpus_held" in _found(tmp_path, EXTRA="suspend: false", WORKER_COMMAND=wrapped)


def test_cpu_mpi_ranks_get_no_dev_shm_finding_however_they_are_counted(tmp_path: Path) -> None:
    """MPI ranks with no GPU granted and nothing saying GPU are CPU ranks (no NCCL segments in /dev/shm):
    no shm finding, also where lint cannot count them (a Katib trial's MPIJob read by its shape)."""
    real = lint_ids(CORPUS / "katib-experiment-mpijob-horovod.yaml")
    assert "shm_default" not in real and "latest_tag" in real
    cpu = "#!/bin/bash\ndocker run --rm --user 1000 -v /o:/o img:1 mpirun -np $N python t.py --out /o\n"
    (tmp_path / "cpu.sh").write_text(cpu)
    assert "shm_default" not in lint_ids(tmp_path / "cpu.sh")
    (tmp_path / "gpu.sh").write_text(cpu.replace("--rm", "--rm --gpus all"))
    assert "shm_default" in lint_ids(tmp_path / "gpu.sh")
