"""lint reads launch commands the way bash and the launchers do, infers the workload before judging
it, and reports one finding per mistake; info is its own status; findings can be waived."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from ddp_doctor.cli import main
from ddp_doctor.deploy.lint.config import LintConfig, load
from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.deploy.lint.shellparse import commands
from ddp_doctor.errors import InputError
from ddp_doctor.render import render
from ddp_doctor.report import Report, Status


def _lint(tmp_path: Path, name: str, text: str) -> dict[str, list[tuple[int, str]]]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    out: dict[str, list[tuple[int, str]]] = {}
    for r in lint_file(str(path)).results:
        out.setdefault(r.id.split(".")[-1], []).append((r.evidence[0].line or 0, str(r.observed["severity"])))
    return out


def test_shell_grammar_arrays_tests_and_hash_inside_words() -> None:
    text = 'A=(\n --x=1 # c\n --y\n)\nif [[ $B == 1 ]]; then srun --container-image nvcr.io#nvidia/pytorch:24.01-py3 torchrun "${A[@]}" t.py; fi\n'
    found = list(commands(text))
    assert [w.text for w in found[0].arrays["A"]] == ["--x=1", "--y"]
    assert [w.line for w in found[0].arrays["A"]] == [2, 3]
    srun = found[1]
    assert srun.words[2].text == "nvcr.io#nvidia/pytorch:24.01-py3" and srun.words[3].text == "torchrun"
    assert srun.words[4].splat == "A" and srun.line == 5


def test_torchrun_args_from_arrays_and_variables_in_slurm(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "job.sbatch",
        """
        #!/bin/bash
        #SBATCH --nodes=4
        #SBATCH --gres=gpu:a100:4
        GPUS=8
        declare -a ARGS=(
            --nproc_per_node=$GPUS
            --nnodes=2
        )
        srun torchrun "${ARGS[@]}" train.py
        """,
    )
    assert found["nproc_exceeds_gpus"] == [(6, "error")]  # 8 ranks on gpu:a100:4, at the array line
    assert found["nnodes_mismatch"] == [(7, "error")]  # 4 nodes, --nnodes=2


@pytest.mark.parametrize(
    "launch",
    [
        "python -u -m torch.distributed.run --nproc_per_node 8 t.py",
        "python3 -m torch.distributed.launch --nproc-per-node=8 t.py",
        "/opt/venv/bin/torchrun --nproc-per-node 8 t.py",
        "tune run --nproc_per_node 8 full_finetune_distributed --config c",
        "accelerate launch --num_processes 8 t.py",
        "bash -xc 'torchrun --nproc_per_node=8 t.py'",
        'bash -lc "cd /w && torchrun --nproc_per_node=8 t.py"',
    ],
)
def test_every_spelling_of_the_launchers(tmp_path: Path, launch: str) -> None:
    found = _lint(tmp_path, "j.sbatch", f"#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus-per-node=4\nsrun {launch}\n")
    assert "nproc_exceeds_gpus" in found, launch


def test_gpus_per_task_and_launcher_in_a_variable(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "j.sbatch",
        """
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --ntasks-per-node=1
        #SBATCH --gpus-per-task=8
        LAUNCHER="accelerate launch --num_processes 16 --num_machines 2 --main_process_ip head"
        srun bash -c "$LAUNCHER train.py"
        """,
    )
    assert "nproc_exceeds_gpus" not in found and "nnodes_mismatch" not in found and "slurm_gpus_missing" not in found


def test_heredoc_sbatch_is_read_as_a_batch_script(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "submit.sh",
        """
        #!/bin/bash
        sbatch <<EOF
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --gpus-per-node=8
        torchrun --nnodes=2 --nproc_per_node=8 train.py
        EOF
        """,
    )
    assert found["torchrun_without_srun"] == [(6, "error")]


def test_syntax_error_is_an_error(tmp_path: Path) -> None:
    found = _lint(tmp_path, "run.sh", '#!/bin/bash\nX="open\ntorchrun --nproc_per_node=2 t.py\n')
    assert found["syntax_error"][0][1] == "error"


def test_cpu_jobs_need_no_gpu_and_unknown_ones_are_info(tmp_path: Path) -> None:
    pod = """
        apiVersion: v1
        kind: Pod
        metadata: {{name: p}}
        spec:
          containers:
          - name: t
            image: {image}
            env: [{{name: {var}, value: "{visible}"}}]
            command: [torchrun, --nproc_per_node=1, t.py, {extra}]
        """
    cpu = _lint(
        tmp_path, "a.yaml", pod.format(image="img:1", var="NVIDIA_VISIBLE_DEVICES", visible="void", extra="--workers=0")
    )
    assert "gpu_limit_missing" not in cpu
    assert "shm_default" not in cpu  # one rank, no DataLoader workers
    unknown = _lint(tmp_path, "b.yaml", pod.format(image="img:1", var="LOGLEVEL", visible="INFO", extra="x"))
    assert unknown["gpu_limit_missing"] == [(6, "info")]
    assert "shm_default" not in unknown  # one rank, and nothing starts DataLoader workers
    gpu = _lint(tmp_path, "c.yaml", pod.format(image="img:1", var="LOGLEVEL", visible="INFO", extra="--backend=nccl"))
    assert gpu["gpu_limit_missing"][0][1] == "error"


def test_shm_error_where_ranks_share_the_container(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "p.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          containers:
          - name: t
            image: img:1
            command: [torchrun, --nproc_per_node=4, t.py]
            resources: {limits: {nvidia.com/gpu: 4}}
        """,
    )
    assert found["shm_default"] == [(6, "error")]


def test_jobset_without_nnodes_and_a_wrong_master_name(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "js.yaml",
        """
        apiVersion: jobset.x-k8s.io/v1alpha2
        kind: JobSet
        metadata: {name: train}
        spec:
          replicatedJobs:
          - name: workers
            template:
              spec:
                parallelism: 2
                completions: 2
                template:
                  spec:
                    containers:
                    - name: t
                      image: img:1
                      env: [{name: MASTER_ADDR, value: "trainer-workers-0-0.train"}]
                      command: [torchrun, --nproc_per_node=1, t.py]
        """,
    )
    assert found["nnodes_mismatch"] == [(17, "error")]
    assert found["rdzv_host_unknown"] == [(16, "warning")]


def test_fixed_nnodes_under_elastic_policy_and_hostpath_shm(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "pj.yaml",
        """
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        metadata: {name: e}
        spec:
          elasticPolicy: {minReplicas: 1, maxReplicas: 4}
          pytorchReplicaSpecs:
            Worker:
              replicas: 2
              template:
                spec:
                  volumes: [{name: shm, hostPath: {path: /dev/shm}}]
                  containers:
                  - name: pytorch
                    image: img:1
                    command: [torchrun, --nnodes=2, --nproc_per_node=1, t.py]
                    volumeMounts: [{name: shm, mountPath: /dev/shm}]
        """,
    )
    assert found["nnodes_fixed_elastic"] == [(15, "error")]
    assert found["shm_host_path"] == [(11, "warning")]


def test_trainjob_and_lws_are_checked(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "tj.yaml",
        """
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainJob
        metadata: {name: t}
        spec:
          runtimeRef: {name: torch-distributed}
          trainer:
            numNodes: 2
            numProcPerNode: 8
            command: [torchrun, train.py]
            resourcesPerNode: {limits: {nvidia.com/gpu: 4}}
        ---
        apiVersion: leaderworkerset.x-k8s.io/v1
        kind: LeaderWorkerSet
        metadata: {name: l}
        spec:
          leaderWorkerTemplate:
            size: 2
            workerTemplate:
              spec:
                containers:
                - name: w
                  image: img:1
                  command: [torchrun, --nproc_per_node=1, t.py]
        """,
    )
    assert found["nproc_exceeds_gpus"] == [(8, "error")]  # numProcPerNode 8 on 4 GPUs
    assert "nnodes_mismatch" in found and found["nnodes_mismatch"][0][0] == 23  # LWS: PET_* not injected


def test_one_finding_per_mistake_lists_every_place(tmp_path: Path) -> None:
    path = Path(__file__).parents[1] / "fixtures" / "lint-corpus" / "kubeflow-pytorchjob-mnist-nccl.yaml"
    latest = [r for r in lint_file(str(path)).results if r.id == "lint.k8s.latest_tag"]
    assert len(latest) == 1
    assert [e.line for e in latest[0].evidence] == [14, 26] and "also:" in latest[0].summary


def test_inline_ignore_and_flags_and_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: t\n"
        "    image: img:latest  # ddp-doctor: ignore[latest_tag]\n"
        "    command: [torchrun, --nproc_per_node=1, t.py]\n"
    )
    ids = {r.id for r in lint_file(str(path)).results}
    assert "lint.k8s.latest_tag" not in ids and "lint.k8s.run_as_root" in ids
    assert main(["lint", "--format", "json", "--ignore", "run_as_root,lint.k8s.no_log_volume", str(path)]) == 0
    ids = {r["id"] for r in json.loads(capsys.readouterr().out)["results"]}
    assert "lint.k8s.run_as_root" not in ids and "lint.k8s.no_log_volume" not in ids
    config = tmp_path / ".ddp-doctor.toml"
    config.write_text('[lint]\nignore = ["shm_default"]\n')
    main(["lint", "--format", "json", "--config", str(config), str(path)])
    assert "lint.k8s.shm_default" not in {r["id"] for r in json.loads(capsys.readouterr().out)["results"]}
    assert main(["lint", "--ignore", "no_such_rule", str(path)]) == 2
    assert "unknown lint rule no_such_rule" in capsys.readouterr().err


def test_the_nearest_config_with_a_lint_section_is_found_and_a_bad_ignore_list_refused(tmp_path: Path) -> None:
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    (tmp_path / "a" / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no lint section: passed over
    (tmp_path / "pyproject.toml").write_text('[tool.ddp-doctor.lint]\nignore = ["latest_tag"]\n')
    found = load([], None, inner)
    assert found.ignore == {"latest_tag"} and found.source == str(tmp_path / "pyproject.toml")
    (tmp_path / "a" / ".ddp-doctor.toml").write_text("[lint]\n")  # a section that ignores nothing is found first
    assert load(["run_as_root"], None, inner) == LintConfig(
        frozenset({"run_as_root"}), str(tmp_path / "a" / ".ddp-doctor.toml")
    )
    (tmp_path / "a" / ".ddp-doctor.toml").write_text('[lint]\nignore = "latest_tag"\n')
    with pytest.raises(InputError, match="lint ignore must be a list of rule names"):
        load([], None, inner)


def test_info_is_its_own_status_in_every_renderer(tmp_path: Path) -> None:
    path = Path(__file__).parents[1] / "fixtures" / "lint-corpus" / "jobset-tpu-jax-workload.yaml"
    report = Report(command="lint", target={"file": str(path)})
    report.extend(lint_file(str(path)).results)
    info = [r for r in report.results if r.id == "lint.k8s.host_network"]
    assert info and info[0].status is Status.INFO
    assert "INFO" in render(report, "text") and "✔ PASS" not in render(report, "text")
    sarif = json.loads(render(report, "sarif"))
    levels = {r["ruleId"]: r["level"] for r in sarif["runs"][0]["results"]}
    assert levels["lint.k8s.host_network"] == "note"
    assert "INFO" in render(report, "markdown") and 'class="info"' in render(report, "html")
    assert "INFO: " in render(report, "junit")
    assert Report.from_dict(json.loads(render(report, "json"))).results[0].status in set(Status)


def test_backend_of_the_training_script_beside_the_config(tmp_path: Path) -> None:
    job = """
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          containers:
          - name: t
            image: img:1
            command: [torchrun, --nproc_per_node=1, train.py]
        """
    (tmp_path / "train.py").write_text('import torch.distributed as dist\ndist.init_process_group(backend="gloo")\n')
    assert "gpu_limit_missing" not in _lint(tmp_path, "cpu.yaml", job)
    (tmp_path / "train.py").write_text('import torch.distributed as dist\ndist.init_process_group("nccl")\n')
    assert _lint(tmp_path, "gpu.yaml", job)["gpu_limit_missing"] == [(6, "error")]


def test_pytorchjob_master_addr_that_is_not_the_operators(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "pj.yaml",
        """
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        metadata: {name: mnist}
        spec:
          pytorchReplicaSpecs:
            Master:
              replicas: 1
              template:
                spec:
                  containers:
                  - name: pytorch
                    image: img:1
                    command: [torchrun, --master_addr=trainer-0, t.py]
            Worker:
              replicas: 1
              template:
                spec:
                  containers:
                  - name: pytorch
                    image: img:1
                    command: [torchrun, --master_addr=mnist-master-0, t.py]
        """,
    )
    assert found["rdzv_host_unknown"] == [(13, "warning")]


def test_remedy_is_written_for_the_launcher_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "j.sbatch"
    path.write_text(
        "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus-per-node=4\n"
        "#SBATCH --container-image=nvcr.io#nvidia/pytorch:24.01-py3\n"
        "srun accelerate launch --num_processes 8 t.py\n"
    )
    results = {r.id: r for r in lint_file(str(path)).results}
    fix = results["lint.slurm.nproc_exceeds_gpus"].remedy or ""
    assert "--num_processes" in fix and "torchrun" not in fix
    assert "lint.slurm.latest_tag" not in results  # the pyxis image is read whole, tag included


def test_jobset_world_across_replicated_jobs(tmp_path: Path) -> None:
    job = """
          - name: {name}
            replicas: 1
            template:
              spec:
                parallelism: {pods}
                template:
                  spec:
                    containers:
                    - name: t
                      image: img:1
                      command: [torchrun, --nnodes={nnodes}, --nproc_per_node=1, t.py]
    """
    head = "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\nspec:\n  replicatedJobs:\n"
    body = job.format(name="master", pods=1, nnodes=4) + job.format(name="workers", pods=3, nnodes=4)
    assert "nnodes_mismatch" not in _lint(tmp_path, "ok.yaml", head + textwrap.dedent(body).replace("\n", "\n  "))
    body = job.format(name="master", pods=1, nnodes=2) + job.format(name="workers", pods=3, nnodes=2)
    assert "nnodes_mismatch" in _lint(tmp_path, "bad.yaml", head + textwrap.dedent(body).replace("\n", "\n  "))


def test_launchers_started_on_every_node_by_mpirun_or_pdsh(tmp_path: Path) -> None:
    for starter in ("mpirun -np 2 --map-by ppr:1:node", "pdsh -w node[1-2]"):
        found = _lint(
            tmp_path,
            "j.sbatch",
            f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=1\n{starter} torchrun --nnodes=2 --nproc_per_node=1 t.py\n",
        )
        assert "torchrun_without_srun" not in found, starter


def test_gpus_from_the_nvidia_runtime_count_as_granted(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "p.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          runtimeClassName: nvidia
          containers:
          - name: t
            image: img:1
            env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]
            command: [torchrun, --nproc_per_node=1, --backend=nccl, t.py]
        """,
    )
    assert "gpu_limit_missing" not in found


def test_unclosed_quote_is_reported_where_bash_reads_it_open(tmp_path: Path) -> None:
    found = _lint(tmp_path, "run.sh", '#!/bin/bash\necho ok\nX="a\ny=1\ntorchrun t.py\n')
    assert found["syntax_error"] == [(3, "error")]


_GRES_JOB = "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gres=gpu:4\n"


@pytest.mark.parametrize(
    "body",
    [
        "srun torchrun --nproc_per_node=$SLURM_GPUS t.py\n",
        "accelerate launch --num_processes $((SLURM_NNODES * SLURM_GPUS)) t.py\n",
        'if [ -z "$SLURM_GPUS" ]; then exit 0; fi\nsrun torchrun --nproc_per_node=4 t.py\n',
        "srun torchrun --nproc_per_node=${SLURM_NTASKS_PER_NODE} t.py\n",
    ],
)
def test_a_slurm_variable_the_request_does_not_set(tmp_path: Path, body: str) -> None:
    found = _lint(tmp_path, "j.sbatch", _GRES_JOB + body)
    assert [sev for _, sev in found["slurm_variable_unset"]] == ["error"], body


@pytest.mark.parametrize(
    "head, body",
    [
        ("#SBATCH --gpus=4\n", "srun torchrun --nproc_per_node=$SLURM_GPUS t.py\n"),
        ("#SBATCH -G 4\n", "srun torchrun --nproc_per_node=$SLURM_GPUS t.py\n"),
        ("", "srun torchrun --nproc_per_node=${SLURM_GPUS:-4} t.py\n"),
        ("", "export SLURM_GPUS=4\nsrun torchrun --nproc_per_node=$SLURM_GPUS t.py\n"),
        ("", "echo gpus: $SLURM_GPUS\nsrun torchrun --nproc_per_node=$SLURM_GPUS_ON_NODE t.py\n"),
        ("#SBATCH --ntasks-per-node=1\n", "srun torchrun --nproc_per_node=4 --nnodes=$SLURM_NTASKS_PER_NODE t.py\n"),
    ],
)
def test_a_slurm_variable_the_request_sets_or_the_script_defaults(tmp_path: Path, head: str, body: str) -> None:
    found = _lint(tmp_path, "j.sbatch", _GRES_JOB + head + body)
    assert "slurm_variable_unset" not in found, (head, body)


def test_gpus_per_node_read_in_a_gres_job_is_only_likely_unset(tmp_path: Path) -> None:
    found = _lint(tmp_path, "j.sbatch", _GRES_JOB + "srun torchrun --nproc_per_node=$SLURM_GPUS_PER_NODE t.py\n")
    assert [sev for _, sev in found["slurm_variable_unset"]] == ["warning"]


_NODE_SCRIPT = """
#!/bin/bash
if [ "$ROLE" == "master" ]; then
  ray start --head --port=6379{flag}
  ray job submit --address=http://127.0.0.1:8265 -- python train.py
else
  ray start --address="$MASTER:6379"{flag}
  sleep infinity
fi
"""


def test_a_ray_worker_branch_that_sleeps_forever_holds_its_gpus(tmp_path: Path) -> None:
    found = _lint(tmp_path, "multi_node.sh", _NODE_SCRIPT.format(flag=""))
    assert found["gpus_held"] == [(7, "warning")]


def test_a_cpu_ray_node_or_a_script_with_no_gpu_work_is_not_holding_gpus(tmp_path: Path) -> None:
    assert "gpus_held" not in _lint(tmp_path, "a.sh", _NODE_SCRIPT.format(flag=" --num-gpus=0"))
    assert "gpus_held" not in _lint(tmp_path, "b.sh", "#!/bin/bash\nexport X=1\npython serve.py\nsleep infinity\n")


def test_a_syntax_error_in_a_script_that_runs_docker_is_still_reported(tmp_path: Path) -> None:
    """The docker run before the error is read (bash runs it) and the error is reported on the script itself."""
    found = _lint(
        tmp_path,
        "run.sh",
        '#!/bin/bash\ndocker run --rm --gpus all img:1 python t.py\nif [ -n "$X" ]; then\n  echo "open\n',
    )
    assert found["syntax_error"] == [(4, "error")] and "gpus_all" in found


@pytest.mark.parametrize(
    "step, root",
    [
        ('enroot start --root --mount=/p:/w img bash -c "torchrun --nproc_per_node=4 t.py"', True),
        ("srun --container-image=nvcr.io#nvidia/pytorch:24.01-py3 --container-remap-root torchrun t.py", True),
        ('enroot start --mount=/p:/w img bash -c "torchrun --nproc_per_node=4 t.py"', False),
    ],
)
def test_a_container_remapped_to_root_from_a_batch_script(tmp_path: Path, step: str, root: bool) -> None:
    found = _lint(tmp_path, "j.sbatch", f"#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gres=gpu:4\n{step}\n")
    assert (found.get("run_as_root") == [(4, "warning")]) is root, found


@pytest.mark.parametrize(
    "image, path",
    [
        ("FlagAlpha/llama2-chinese-7b:gradio", "FlagAlpha/llama2-chinese-7b"),
        ("ghcr.io/Org/train:v1", "Org/train"),
        ("Registry.Example.com:5000/team/train:V1", None),
        ("nvcr.io/nvidia/pytorch:24.01-py3", None),
        ("localhost:5000/train@sha256:" + "a" * 64, None),
        ("${IMAGE}", None),
        ("IMAGE_NAME", None),
        ("REGISTRY/IMAGE:TAG", None),
        # Templates leave names in capitals for the user to replace (YOUR_REGISTRY/...  # REPLACE), not a mistake.
        ("YOUR_REGISTRY/kubeflow-llm-training:latest", None),
        ("ghcr.io/MY_ORG/train:v1", None),
        ("ACCOUNT/train:v1", None),
        ("__REGISTRY__/train:v1", None),
        ("MyOrg/train:v1", "MyOrg/train"),  # a name with capitals mixed in is what the grammar refuses
    ],
)
def test_capital_letters_only_in_the_repository_path_are_refused(image: str, path: str | None) -> None:
    from ddp_doctor.deploy.lint.rules import uppercase_path

    assert uppercase_path(image) == path


def test_compose_image_with_capitals(tmp_path: Path) -> None:
    found = _lint(tmp_path, "docker-compose.yml", "services:\n  app:\n    image: FlagAlpha/llama2:gradio\n")
    assert found["image_reference_invalid"] == [(3, "error")]


_RAY_SLURM = """
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gres=gpu:8
#SBATCH --ntasks-per-node=1
nodes=($(scontrol show hostnames $SLURM_JOB_NODELIST))
head=${{nodes[0]}}
srun --nodes=1 --ntasks=1 -w $head \\
    ray start --head --port=6379 --num-gpus 8 \\
    --block &
sleep 10
srun --nodes=1 --ntasks=1 -w ${{nodes[1]}} ray start --address $head:6379 --num-gpus 8 --block &
python train.py
{end}
"""


def test_a_batch_script_that_waits_on_blocking_ray_nodes_holds_its_allocation(tmp_path: Path) -> None:
    """`wait` waits for every background job: after blocking `ray start --block &` steps (written over
    several lines or not) it never returns, wherever it stands in the script."""
    found = _lint(tmp_path, "ray.sbatch", _RAY_SLURM.format(end="wait\necho finished"))
    assert found["gpus_held"] == [(14, "warning")], found
    # Without the wait the batch script ends after the driver, and Slurm ends the steps with it.
    assert "gpus_held" not in _lint(tmp_path, "ray2.sbatch", _RAY_SLURM.format(end="echo finished"))


@pytest.mark.parametrize("order", ["worker first", "head first"])
def test_a_branch_that_blocks_forever_beside_the_work_holds_its_gpus(tmp_path: Path, order: str) -> None:
    worker = "ray start --address=$MASTER_ADDR:6379 --num-gpus 8 --block"
    head = "ray start --head --port=6379 --num-gpus 8\n  python3 train.py"
    first, second = (worker, head) if order == "worker first" else (head, worker)
    text = f'#!/bin/bash\nif [ "$NODE_RANK" != "0" ]; then\n  {first}\nelse\n  {second}\nfi\n'
    found = _lint(tmp_path, "node.sh", text)
    assert [sev for _, sev in found["gpus_held"]] == ["warning"], found
    # A worker that starts a Ray node and returns leaves with its script.
    quiet = _lint(tmp_path, "node2.sh", text.replace(" --block", ""))
    assert "gpus_held" not in quiet, quiet


_RAY_CLUSTER = """
apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: rl
spec:
  headGroupSpec:
    rayStartParams: {{{params}}}
    template:
      spec:
        containers:
          - name: ray-head
            image: rayproject/ray:2.40.0-gpu
            resources:
              limits:
                {memory}nvidia.com/gpu: 8
{mount}
"""
_SHM_MOUNT = """
            volumeMounts:
              - name: shm
                mountPath: /dev/shm
        volumes:
          - name: shm
            emptyDir:
              medium: Memory
              sizeLimit: {size}
"""


@pytest.mark.parametrize(
    ("params", "size", "held_back"),
    [
        ("", "10Gi", True),  # 30% of 200Gi (60 GiB) does not fit 10 GiB
        ("", "64Gi", False),
        ("object-store-memory: '5000000000'", "10Gi", False),
        ("object-store-memory: '50000000000'", "10Gi", True),
        ("", None, False),  # KubeRay mounts a /dev/shm sized to the memory limit
        # ... which an object store set larger than the limit does not fit (ValueError at ray start)
        ("object-store-memory: '250000000000'", None, True),
        ("object-store-memory: '100000000000'", None, False),
    ],
)
def test_a_ray_node_whose_object_store_does_not_fit_its_dev_shm(
    tmp_path: Path, params: str, size: str | None, held_back: bool
) -> None:
    mount = _SHM_MOUNT.format(size=size) if size else ""
    text = _RAY_CLUSTER.format(params=params, mount=mount, memory="memory: 200Gi\n                ")
    found = _lint(tmp_path, "ray.yaml", text)
    assert ("shm_object_store" in found) is held_back, found


@pytest.mark.parametrize(("size", "held_back"), [("2Gi", True), ("16Gi", False), (None, False)])
def test_a_gpu_ray_node_with_no_memory_limit_sizes_its_store_from_the_node(
    tmp_path: Path, size: str | None, held_back: bool
) -> None:
    """No memory limit: Ray takes 30% of the node's memory, more than 2 GiB on any GPU machine; KubeRay's own
    /dev/shm is then bounded by the node only."""
    mount = _SHM_MOUNT.format(size=size) if size else ""
    found = _lint(tmp_path, "ray.yaml", _RAY_CLUSTER.format(params="", mount=mount, memory=""))
    assert ("shm_object_store" in found) is held_back, found


@pytest.mark.parametrize(
    ("submit", "launcher", "mismatch"),
    [
        ("python mason.py --cluster c --num_nodes 2 --gpus 8 --", "torchrun --nproc_per_node=8 train.py", True),
        ("python mason.py --num_nodes 2 --gpus 8 --", 'bash -c "torchrun --nproc_per_node=8 train.py"', True),
        ("python mason.py --num_nodes 2 --gpus 8 --", "accelerate launch --num_processes 8 train.py", True),
        ("gantry run --replicas 2 --gpus 8 --", "torchrun --nnodes 2 --nproc_per_node=8 train.py", False),
        ("python mason.py --num_nodes 1 --gpus 8 --", "torchrun --nproc_per_node=8 train.py", False),
        ("python submit.py --num_nodes 2", "torchrun --nproc_per_node=8 train.py", False),  # no `--`: not handed over
        (
            "python mason.py --num_nodes 2 -- source env.sh \\&\\& NCCL_DEBUG=INFO",
            "torchrun --nproc_per_node=8 t.py",
            True,
        ),
    ],
)
def test_a_submitters_node_count_against_the_launchers(
    tmp_path: Path, submit: str, launcher: str, mismatch: bool
) -> None:
    """A submitter that starts the command after `--` on each of N nodes is judged like srun -N."""
    found = _lint(tmp_path, "submit.sh", f"#!/bin/bash\n{submit} {launcher}\n")
    assert ("nnodes_mismatch" in found) is mismatch, found


_DEEPSPEED = """
#!/bin/bash
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
{start} deepspeed {flags} --num_nodes=2 --num_gpus=8 --master_addr=$MASTER_ADDR train.py
"""


@pytest.mark.parametrize(
    ("start", "flags", "expected"),
    [
        ("srun", "--hostfile /dev/null", "error"),
        ("srun", "", "error"),
        ("srun", "--hostfile hosts.txt", "warning"),
        ("srun", "--no_ssh --node_rank $SLURM_NODEID", None),
        ("", "--hostfile hosts.txt", None),  # the runner once, on the first node: it starts the others
    ],
)
def test_deepspeeds_runner_started_on_every_node(tmp_path: Path, start: str, flags: str, expected: str | None) -> None:
    found = _lint(tmp_path, "ds.sbatch", _DEEPSPEED.format(start=start, flags=flags))
    assert [sev for _, sev in found.get("deepspeed_per_node", [])] == ([expected] if expected else []), found


def test_a_node_count_given_at_run_time_beside_a_remote_main_process(tmp_path: Path) -> None:
    """`--num_machines $3 --main_process_ip $1`: written for several nodes; without --machine_rank every node
    is machine 0 once N > 1 (a warning: the count may be 1)."""
    text = "#!/bin/bash\nN=$3\naccelerate launch --num_machines=$N --num_processes=16 --main_process_ip=$1 main.py\n"
    assert _lint(tmp_path, "run.sh", text)["node_rank_missing"] == [(3, "warning")]
    ranked = text.replace("main.py", "--machine_rank=$2 main.py")
    assert "node_rank_missing" not in _lint(tmp_path, "ranked.sh", ranked)
    local = text.replace("$1", "127.0.0.1")
    assert "node_rank_missing" not in _lint(tmp_path, "local.sh", local)


_INDEXED = """
apiVersion: batch/v1
kind: Job
metadata:
  name: ddp
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
{subdomain}      restartPolicy: Never
      containers:
        - name: trainer
          image: nvcr.io/nvidia/pytorch:24.01-py3
          command: ["torchrun", "--nnodes=2", "--nproc_per_node=1", "--node_rank=$(JOB_COMPLETION_INDEX)",
                    "--master_addr={host}", "--master_port=29500", "train.py"]
          resources:
            limits:
              nvidia.com/gpu: 1
"""


@pytest.mark.parametrize(
    ("subdomain", "host", "unresolvable"),
    [
        ("", "ddp-0", True),
        ("", "ddp-0.ddp", True),  # the Service may exist, but no pod names itself under it
        ("      subdomain: ddp-svc\n", "ddp-0", True),
        ("      subdomain: ddp-svc\n", "ddp-0.ddp-svc", False),
        ("      subdomain: ddp-svc\n", "ddp-0.ddp-svc.default.svc.cluster.local", False),
        ("", "trainer-head.example.com", False),  # not a pod's name: left to the user
    ],
)
def test_an_indexed_jobs_first_pod_is_found_only_through_its_subdomain(
    tmp_path: Path, subdomain: str, host: str, unresolvable: bool
) -> None:
    found = _lint(tmp_path, "job.yaml", _INDEXED.format(subdomain=subdomain, host=host))
    assert ("rdzv_host_unresolvable" in found) is unresolvable, found


@pytest.mark.parametrize(
    "text",
    [
        (
            "#!/bin/bash\n#SBATCH --ntasks=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=8\n"
            "srun torchrun --nproc_per_node 8 train.py\n"
        ),
        "#!/bin/bash\nsrun -n 16 --ntasks-per-node=8 --gpus-per-node=8 torchrun --nproc_per_node 8 train.py\n",
    ],
)
def test_nodes_implied_by_tasks_and_tasks_per_node(tmp_path: Path, text: str) -> None:
    """--ntasks N with --ntasks-per-node K and no --nodes: ceil(N / K) nodes, so torchrun needs --nnodes."""
    assert [sev for _, sev in _lint(tmp_path, "job.sbatch", text)["nnodes_mismatch"]] == ["error"]
    fixed = text.replace("torchrun --nproc_per_node 8", "torchrun --nnodes 2 --nproc_per_node 8")
    assert "nnodes_mismatch" not in _lint(tmp_path, "fixed.sbatch", fixed)


def test_srun_steps_that_start_ray_nodes_ask_slurm_for_no_gpu(tmp_path: Path) -> None:
    text = """
    #!/bin/bash
    #SBATCH -N 2
    #SBATCH --ntasks-per-node=1
    #SBATCH --exclusive
    #SBATCH --container-image=nvcr.io/nvidia/pytorch:24.01-py3
    srun --nodes=1 --ntasks=1 -w "$head" bash -c "ray start --head --port=6379 --block" &
    srun --nodes=1 --ntasks=1 -w "$worker" bash -c "ray start --address $head:6379 --block" &
    sleep 30
    srun --overlap --nodes=1 --ntasks=1 -w "$head" ray job submit -- python3 train.py
    """
    assert [sev for _, sev in _lint(tmp_path, "ray.sbatch", text)["slurm_gpus_missing"]] == ["warning"]
    asked = text.replace("#SBATCH --exclusive", "#SBATCH --gpus-per-node=8")
    assert "slurm_gpus_missing" not in _lint(tmp_path, "asked.sbatch", asked)
    cpu = text.replace("--block", "--num-gpus=0 --block")
    assert "slurm_gpus_missing" not in _lint(tmp_path, "cpu.sbatch", cpu)


@pytest.mark.parametrize(
    ("command", "told"),
    [
        ("srun python train.py --num_nodes 1 --devices 8", True),
        ("srun python train.py trainer.num_nodes=1 trainer.devices=8", True),
        ("srun python train.py --num_nodes 2 --devices 8", False),
        ("srun python train.py --num_nodes $SLURM_NNODES --devices 8", False),
        ("srun python gnn.py --nodes 5000", False),  # --nodes of a script is no node count: left alone
    ],
)
def test_a_training_script_told_another_node_count(tmp_path: Path, command: str, told: bool) -> None:
    text = f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n#SBATCH --gres=gpu:8\n{command}\n"
    found = _lint(tmp_path, "job.sbatch", text)
    assert ("script_nodes_mismatch" in found) is told, found


@pytest.mark.parametrize(
    ("lines", "conflict"),
    [
        ("export WORLD_SIZE=8\nsrun python train.py", True),  # 16 tasks, each one rank
        ("NNODES=2\nexport WORLD_SIZE=$((NNODES * 8))\nsrun python train.py", False),
        ("export WORLD_SIZE=$SLURM_NTASKS\nsrun python train.py", False),
        ("srun python train.py --world_size 8", True),
        ("srun python train.py --world_size 16", False),
        ("export WORLD_SIZE=8\nsrun torchrun --nnodes 2 --nproc_per_node 8 train.py", False),  # torchrun sets its own
    ],
)
def test_a_world_size_stated_apart_from_the_tasks_srun_starts(tmp_path: Path, lines: str, conflict: bool) -> None:
    text = f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n#SBATCH --gres=gpu:8\n{lines}\n"
    found = _lint(tmp_path, "job.sbatch", text)
    assert ("world_size_conflict" in found) is conflict, found


def test_sbatch_lines_after_the_first_command_ask_for_nothing(tmp_path: Path) -> None:
    """sbatch stops reading #SBATCH at the first command: a --nodes=2 after it leaves the job on one node."""
    late = (
        "#!/bin/bash\nmodule load cuda\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n"
        "srun torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint h:29500 train.py\n"
    )
    found = _lint(tmp_path, "late.sbatch", late)
    assert found["sbatch_directive_ignored"] == [(3, "warning")]
    assert found["nnodes_mismatch"] == [(5, "error")]
    early = late.replace("module load cuda\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n", "")
    early = early.replace(
        "#!/bin/bash\n", "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\nmodule load cuda\n"
    )
    assert not {"sbatch_directive_ignored", "nnodes_mismatch"} & set(_lint(tmp_path, "early.sbatch", early))
    # Another script's directives, written out by this one, are that script's.
    inner = early + "cat > next.sbatch <<EOF\n#!/bin/bash\n#SBATCH --nodes=4\nsrun hostname\nEOF\n"
    assert "sbatch_directive_ignored" not in _lint(tmp_path, "inner.sbatch", inner)


def test_sruns_own_tasks_over_its_nodes_override_the_batch_tasks_per_node(tmp_path: Path) -> None:
    """srun --nodes=2 --ntasks=2 runs one task per node, whatever #SBATCH --ntasks-per-node says."""
    text = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n#SBATCH --gpus-per-node=2\n"
        "srun --nodes=2 --ntasks=2 torchrun --nproc_per_node=2 train.py\n"
    )
    found = _lint(tmp_path, "job.sbatch", text)
    assert "tasks_per_node" not in found, found
    assert found["nnodes_mismatch"] == [(5, "error")]  # two one-node worlds
    many = text.replace("--ntasks=2 torchrun", "--ntasks=4 torchrun")
    assert "tasks_per_node" in _lint(tmp_path, "many.sbatch", many)


@pytest.mark.parametrize(("tag", "moves"), [("vllm011.latest", True), ("cu121_latest", True), ("2.4.0", False)])
def test_a_tag_that_names_latest_by_any_separator_moves(tmp_path: Path, tag: str, moves: bool) -> None:
    text = f"services:\n  t:\n    image: verlai/verl:{tag}\n    user: '1000'\n    command: python serve.py\n"
    assert ("latest_tag" in _lint(tmp_path, "compose.yaml", text)) is moves


_SERVICE = """
apiVersion: v1
kind: Service
metadata:
  name: master
spec:
  clusterIP: None
  selector: {selector}
---
"""


@pytest.mark.parametrize(
    ("selector", "host", "every_pod"),
    [
        ("{app: ddp}", "master", True),
        ("{app: ddp}", "master.default.svc.cluster.local", True),
        ("{app: ddp, batch.kubernetes.io/job-completion-index: '0'}", "master", False),  # pod 0 only
        ("{app: other}", "master", False),
    ],
)
def test_a_rendezvous_at_a_service_that_selects_every_pod(
    tmp_path: Path, selector: str, host: str, every_pod: bool
) -> None:
    job = _INDEXED.format(subdomain="", host=host).replace(
        "  template:\n    spec:\n", "  template:\n    metadata:\n      labels: {app: ddp}\n    spec:\n"
    )
    found = _lint(tmp_path, "job.yaml", _SERVICE.format(selector=selector) + job.lstrip("\n"))
    assert ("rdzv_host_every_pod" in found) is every_pod, found


@pytest.mark.parametrize(
    ("machines", "exceeds"),
    [("$NNODES", False), ("2", False), ("1", True)],
)
def test_accelerates_total_processes_over_machines_it_cannot_count(
    tmp_path: Path, machines: str, exceeds: bool
) -> None:
    """--num_processes counts every machine's ranks: with --num_machines a variable, the ranks per node are
    unknown (not the total on one node)."""
    text = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:8\nNNODES=$SLURM_NNODES\n"
        f"srun accelerate launch --num_machines {machines} --num_processes 16 --machine_rank \\$SLURM_NODEID "
        "--main_process_ip head train.py\n"
    )
    assert ("nproc_exceeds_gpus" in _lint(tmp_path, "job.sbatch", text)) is exceeds


def test_a_default_for_a_variable_the_scheduler_sets_is_not_what_runs(tmp_path: Path) -> None:
    text = "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gres=gpu:4\nNGPU=${SLURM_GPUS_ON_NODE:-8}\nsrun torchrun --nproc_per_node $NGPU train.py\n"
    assert "nproc_exceeds_gpus" not in _lint(tmp_path, "job.sbatch", text)
    own = text.replace("${SLURM_GPUS_ON_NODE:-8}", "${MY_GPUS:-8}")
    assert "nproc_exceeds_gpus" in _lint(tmp_path, "own.sbatch", own)


_MPIJOB = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: matmul
spec:
  slotsPerWorker: 2
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
            - name: launcher
              image: registry.local/mpi4py:1.0
              command: [mpirun, -n, "4", python, /opt/mpi/matmul.py]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: worker
              image: registry.local/mpi4py:1.0
              resources:
                limits: {{{limits}}}
"""


@pytest.mark.parametrize(("limits", "shm"), [("cpu: 1", False), ("nvidia.com/gpu: 2", True)])
def test_mpi_ranks_with_no_gpu_are_cpu_ranks_for_dev_shm(tmp_path: Path, limits: str, shm: bool) -> None:
    """Two MPI ranks per worker pod on the default /dev/shm: NCCL's segments matter only where they drive GPUs."""
    found = _lint(tmp_path, "mpijob.yaml", _MPIJOB.format(limits=limits))
    assert ("shm_default" in found) is shm, found


_TRAINJOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: tj
spec:
  runtimeRef:
    name: {runtime}
  trainer:
    numNodes: 2
{image}    command: [torchrun, train.py]
"""


@pytest.mark.parametrize(
    ("runtime", "image", "root"),
    [
        ("torch-distributed", "    image: python:3.11-slim\n", True),  # the stock runtime sets no user
        ("torch-distributed", "    image: rayproject/ray:2.40.0\n", False),  # an image known to end non-root
        ("deepspeed-distributed", "    image: python:3.11-slim\n", False),  # its runtime runs as user 1000
        ("torch-distributed", "", False),  # the runtime's own image: judged where the runtime is linted
        ("my-runtime", "    image: python:3.11-slim\n", False),  # a runtime lint cannot see
    ],
)
def test_a_trainjobs_own_image_on_a_runtime_that_sets_no_user(
    tmp_path: Path, runtime: str, image: str, root: bool
) -> None:
    found = _lint(tmp_path, "tj.yaml", _TRAINJOB.format(runtime=runtime, image=image))
    assert ("run_as_root" in found) is root, found


_TRAINING_POD = """
apiVersion: {api}
kind: {kind}
metadata:
  name: train
spec:
{spec}"""
_POD_SPEC = """
  {policy}containers:
    - name: train
      image: registry.local/train:1.0
      command: [{command}]
      resources:
        limits: {{nvidia.com/gpu: 1}}
"""


@pytest.mark.parametrize(
    ("kind", "policy", "command", "held"),
    [
        ("Pod", "", "torchrun, --nproc-per-node, '1', train.py", True),  # a Pod's default: Always
        ("Pod", "restartPolicy: Always\n  ", "torchrun, --nproc-per-node, '1', train.py", True),
        ("Pod", "restartPolicy: Never\n  ", "torchrun, --nproc-per-node, '1', train.py", False),
        ("Pod", "", "python, -m, vllm.entrypoints.openai.api_server", False),  # serving is meant to run on
        ("Deployment", "", "torchrun, --nproc-per-node, '1', train.py", True),
    ],
)
def test_training_under_a_policy_that_starts_it_again_holds_its_gpus(
    tmp_path: Path, kind: str, policy: str, command: str, held: bool
) -> None:
    spec = _POD_SPEC.format(policy=policy, command=command)
    if kind == "Deployment":
        indented = "\n".join("    " + line if line else line for line in spec.split("\n"))
        spec = (
            "  selector: {matchLabels: {app: t}}\n  template:\n    metadata: {labels: {app: t}}\n    spec:" + indented
        )
    text = _TRAINING_POD.format(api="apps/v1" if kind == "Deployment" else "v1", kind=kind, spec=spec)
    found = _lint(tmp_path, "train.yaml", text)
    assert ("gpus_held" in found) is held, found


_SIDECAR_JOB = """
apiVersion: batch/v1
kind: {kind}
metadata:
  name: train
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: trainer
          image: registry.local/train:1.0
          command: [torchrun, --nproc-per-node, "1", train.py]
          resources:
            limits: {{nvidia.com/gpu: 1}}
        - name: sidecar
          {sidecar}
"""


@pytest.mark.parametrize(
    ("sidecar", "held"),
    [
        ('image: busybox:1.36\n          command: [sh, -c, "tail -f /dev/null"]', True),
        ("image: tensorflow/tensorflow:2.16.1\n          command: [tensorboard, --logdir, /logs]", True),
        ("image: fluent/fluent-bit:2.2", True),  # the image's own server, no command given
        # The image's entrypoint given args only is still its server: a Prometheus exporter serves /metrics.
        ('image: prom/node-exporter:v1.6.0\n          args: ["--web.listen-address=:9100"]', True),
        ("image: nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.0-ubuntu22.04", True),
        ("image: registry.local/tools:1\n          command: [/bin/node_exporter, --web.listen-address=:9100]", True),
        # A command of its own replaces the entrypoint: a one-off export that ends.
        ('image: prom/node-exporter:v1.6.0\n          command: [sh, -c, "python onnx_exporter.py"]', False),
        ('image: busybox:1.36\n          command: [sh, -c, "cp -r /src /dst"]', False),  # ends by itself
    ],
)
def test_a_sidecar_that_never_ends_keeps_the_training_pods_gpus(tmp_path: Path, sidecar: str, held: bool) -> None:
    """A pod ends when all its containers have: a second container that runs on holds the trainer's GPUs."""
    found = _lint(tmp_path, "job.yaml", _SIDECAR_JOB.format(kind="Job", sidecar=sidecar))
    assert ("gpus_held" in found) is held, found
    if held:
        assert found["gpus_held"] == [(15, "warning")]  # the sidecar's line


@pytest.mark.parametrize(
    ("command", "held"),
    [
        ('[bash, -c, "echo start\\npython train.py --epochs 2 2>&1 | tee /logs/t.log\\necho done"]', True),
        ("[python, -m, pkg.finetune, --lr, 1e-3]", True),
        ('[bash, -c, "python export_model.py"]', False),  # no training program: not judged as the trainer
    ],
)
def test_a_training_program_run_without_a_launcher_is_held_by_a_sidecar(
    tmp_path: Path, command: str, held: bool
) -> None:
    """One rank started by the container itself (python train.py inside bash -c), no launcher: its pod too stays
    with its GPU while the sidecar serves."""
    text = _SIDECAR_JOB.format(kind="Job", sidecar="image: prom/node-exporter:v1.6.0")
    text = text.replace('[torchrun, --nproc-per-node, "1", train.py]', command)
    found = _lint(tmp_path, "job.yaml", text)
    assert ("gpus_held" in found) is held, found


_TWO_RANKS = """
services:
  rank0:
    image: registry.local/train:1.0
    runtime: nvidia
{env0}    command: python -u main.py --backend nccl --init-method tcp://10.1.0.10:23456 --world-size 2 --rank 0{flag}
  rank1:
    image: registry.local/train:1.0
    runtime: nvidia
{env1}    command: python -u main.py --backend nccl --init-method tcp://10.1.0.10:23456 --world-size 2 --rank 1{flag}
"""


@pytest.mark.parametrize(
    ("env0", "env1", "flag", "shared"),
    [
        ("", "", "", True),
        ("    environment: [NVIDIA_VISIBLE_DEVICES=0]\n", "    environment: [NVIDIA_VISIBLE_DEVICES=1]\n", "", False),
        ("", "", " --gpu 0", False),  # the script is told its device
    ],
)
def test_ranks_on_one_host_each_handed_every_gpu_with_nothing_choosing_a_device(
    tmp_path: Path, env0: str, env1: str, flag: str, shared: bool
) -> None:
    found = _lint(tmp_path, "compose.yaml", _TWO_RANKS.format(env0=env0, env1=env1, flag=flag))
    assert ("gpu_shared" in found) is shared, found
    if shared:
        assert sorted(found["gpu_shared"]) == [(5, "warning"), (9, "warning")]
