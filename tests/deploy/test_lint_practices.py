"""The best practices and the breakages that no parser error shows: a Dockerfile line that belongs to no
instruction, a backslash that ends a launch command instead of continuing it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddp_doctor.deploy.lint.engine import lint_file
from tests.conftest import FIXTURES, run_cli

CORPUS = FIXTURES / "lint-corpus"


def _lint(tmp_path: Path, name: str, text: str) -> dict[str, list[tuple[int, str]]]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return _found(path)


def _found(path: Path) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for r in lint_file(str(path)).results:
        out.setdefault(r.id.split(".")[-1], []).append((r.evidence[0].line or 0, str(r.observed["severity"])))
    return out


def test_a_dockerfile_line_outside_any_instruction_stops_the_build(tmp_path: Path) -> None:
    # The real file: a RUN whose continuation ends one command too early (no `&& \`).
    assert _found(CORPUS / "torchelastic-azure.Dockerfile")["syntax_error"] == [(13, "error")]
    found = _lint(
        tmp_path,
        "Dockerfile",
        """
        # syntax=docker/dockerfile:1
        FROM nvcr.io/nvidia/pytorch:24.01-py3
        RUN pip install a && \\
            # a comment inside the continuation is fine
            pip install b

        RUN <<EOF
        set -e
        pip install c
        EOF
        COPY --chown=1000 . /app
        USER 1000
        """,
    )
    assert "syntax_error" not in found, found
    path = tmp_path / "bad.Dockerfile"
    path.write_text("FROM python:3.12\nRUN pip install a\n    pip install b\nUSER 1000\n")
    proc = run_cli("lint", str(path))
    assert proc.returncode == 1 and "unknown instruction pip" in proc.stdout


def test_a_backslash_that_ends_the_launch_command(tmp_path: Path) -> None:
    script = "#!/bin/bash\ntorchrun --nproc-per-node 8 \\ \n    --nnodes 2 \\\n    train.py\n"
    (tmp_path / "space.sh").write_text(script)
    assert _found(tmp_path / "space.sh")["broken_continuation"] == [(2, "error")]
    (tmp_path / "crlf.sh").write_text(script.replace(" \\ \n", " \\\n").replace("\n", "\r\n"))
    assert (2, "error") in _found(tmp_path / "crlf.sh")["broken_continuation"]
    found = _lint(
        tmp_path,
        "gaps.sbatch",
        """
        #!/bin/bash
        #SBATCH --nodes=1
        #SBATCH --gpus-per-node=8
        srun torchrun --nproc-per-node 8 \\

            --standalone train.py
        srun python y.py \\
          # the learning rate
          --lr 0.1
        """,
    )
    assert found["broken_continuation"] == [(4, "error"), (7, "error")]
    noted = _lint(
        tmp_path,
        "noted.sh",
        """
        #!/bin/bash
        python train.py \\
            --nnodes 2 \\  # two machines
            --lr 0.1 \\
            "$EXTRA"
        """,
    )
    assert noted["broken_continuation"] == [(3, "error")]
    fine = _lint(
        tmp_path,
        "fine.sh",
        """
        #!/bin/bash
        torchrun --nproc-per-node 8 \\
            --nnodes 1 \\
            train.py
        cat <<EOF
        a line that ends in a backslash \\ 
        --inside the heredoc
        EOF
        echo done \\
        # a comment after a continued echo, then a command that is not a flag
        python x.py
        """,
    )
    assert "broken_continuation" not in fine, fine


def test_a_static_rendezvous_across_nodes_needs_each_nodes_rank(tmp_path: Path) -> None:
    missing = _lint(
        tmp_path,
        "two.sbatch",
        """
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --gpus-per-node=8
        head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
        srun torchrun --nnodes 2 --nproc-per-node 8 --master-addr "$head" --master-port 29500 train.py
        """,
    )
    assert missing["node_rank_missing"] == [(5, "error")]
    fixed = _lint(
        tmp_path,
        "fixed.sbatch",
        """
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --gpus-per-node=8
        srun torchrun --nnodes 2 --nproc-per-node 8 --node-rank 0 --master-addr node1 train.py
        """,
    )
    assert fixed["node_rank_fixed"] == [(4, "error")]
    by_hand = _lint(
        tmp_path,
        "node0.sh",
        """
        #!/bin/bash
        RANK_OF_NODE=0
        torchrun --nnodes=2 --nproc_per_node=8 --node_rank=$RANK_OF_NODE --master_addr=10.0.0.1 train.py
        """,
    )
    assert by_hand["node_rank_fixed"] == [(3, "info")]  # a copy per node is how such scripts are used
    # NODE_RANK=0 and NNODES=3 handed to the project's own launcher script (a real wrapper).
    assert _found(CORPUS / "sensenova-u1-train_multi_node.sh")["node_rank_fixed"] == [(2, "info")]
    fine = {
        "c10d.sbatch": "srun torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint n1:29500 t.py",
        "per-node.sbatch": "srun bash -c 'torchrun --nnodes 2 --node-rank $SLURM_NODEID --master-addr n1 t.py'",
        "one-node.sbatch": "srun torchrun --nnodes 1 --nproc-per-node 8 --master-addr localhost t.py",
    }
    for name, line in fine.items():
        found = _lint(tmp_path, name, f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n{line}\n")
        assert "node_rank_missing" not in found and "node_rank_fixed" not in found, (name, found)


def test_the_operator_gives_each_pod_its_node_rank(tmp_path: Path) -> None:
    pytorchjob = _lint(
        tmp_path,
        "pj.yaml",
        """
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        metadata: {name: t}
        spec:
          pytorchReplicaSpecs:
            Worker:
              replicas: 2
              template:
                spec:
                  containers:
                  - name: pytorch
                    image: img:1
                    command: [torchrun, --nnodes=2, --nproc-per-node=1, --master-addr=$(MASTER_ADDR), t.py]
                    resources: {limits: {nvidia.com/gpu: 1}}
        """,
    )
    assert "node_rank_missing" not in pytorchjob
    indexed = _lint(
        tmp_path,
        "job.yaml",
        """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: t}
        spec:
          completions: 2
          parallelism: 2
          completionMode: Indexed
          template:
            spec:
              subdomain: t
              containers:
              - name: t
                image: img:1
                command: [torchrun, --nnodes=2, --nproc-per-node=1, --master-addr=t-0.t, t.py]
                resources: {limits: {nvidia.com/gpu: 1}}
        """,
    )
    assert [sev for _, sev in indexed["node_rank_missing"]] == ["error"]


def test_every_gpu_of_the_host_is_named_in_each_format(tmp_path: Path) -> None:
    for name, line, text in [
        ("qwen-docker_web_demo.sh", None, None),  # docker run --gpus all
        ("detectron2-docker-compose.yml", None, None),  # a reservation with no count
        ("a.sh", 2, "#!/bin/bash\ndocker run --runtime=nvidia --user 1000 img:1 torchrun --nproc-per-node 2 t.py\n"),
        # the line where "all" is written
        ("b.sh", 2, "#!/bin/bash\nNV=${NV:-all}\ndocker run --gpus $NV --user 1000 img:1 bash\n"),
        ("compose.yaml", 4, "services:\n  t:\n    image: img:1\n    gpus: all\n    user: '1000'\n"),
        (
            "c.sh",
            3,  # the run line: the word is not the variable alone
            '#!/bin/bash\nNV=${NVIDIA_VISIBLE_DEVICES:-"all"}\ndocker run --gpus device=$NV --user 1 img:1 bash\n',
        ),
    ]:
        path = CORPUS / name if text is None else tmp_path / name
        if text is not None:
            path.write_text(text)
        found = _found(path)
        assert "gpus_all" in found, name
        if line is not None:
            assert found["gpus_all"] == [(line, "warning")], name
    chosen = [
        "#!/bin/bash\ndocker run --gpus 2 --user 1000 img:1 bash\n",
        "#!/bin/bash\ndocker run --gpus '\"device=0,1\"' --user 1000 img:1 bash\n",
        "#!/bin/bash\nNV_GPU=0,1 nvidia-docker run --user 1000 img:1 bash\n",
        "#!/bin/bash\ndocker run --runtime=nvidia -e NVIDIA_VISIBLE_DEVICES=0,1 --user 1000 img:1 bash\n",
    ]
    agent = "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: dcgm}\nspec:\n  template:\n    spec:\n"
    agent += "      containers:\n      - {name: d, image: dcgm:1, env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]}\n"
    (tmp_path / "agent.yaml").write_text(agent)
    assert "gpus_all" not in _found(tmp_path / "agent.yaml")  # a node agent is meant to see every GPU
    for i, text in enumerate(chosen):
        (tmp_path / f"ok{i}.sh").write_text(text)
        assert "gpus_all" not in _found(tmp_path / f"ok{i}.sh"), text


def test_the_user_a_container_runs_as_in_every_format(tmp_path: Path) -> None:
    # A serving Deployment is the job's work too; an MPI launcher and a Ray image (USER ray) are not judged.
    assert "run_as_root" in _found(CORPUS / "ai-on-gke-llama2-70b-tgi-deployment.yaml")
    docker = _lint(tmp_path, "d.sh", "#!/bin/bash\ndocker run --gpus 1 img:1 python serve.py\n")
    assert docker["run_as_root"] == [(2, "warning")]
    ray = _lint(tmp_path, "r.sh", "#!/bin/bash\ndocker run --gpus 1 rayproject/ray:2.9.0-gpu python t.py\n")
    assert "run_as_root" not in ray
    # nginx's unprivileged image ends with USER 101 (the real file: a LeaderWorkerSet of it, no training).
    assert "run_as_root" not in _found(CORPUS / "lws-sample.yaml")
    nginx = _lint(tmp_path, "n.sh", "#!/bin/bash\ndocker run --gpus 1 nginx:1.27 python t.py\n")
    assert nginx["run_as_root"] == [(2, "warning")]
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "Dockerfile").write_text("FROM python:3.12\nRUN useradd -u 1000 me\nUSER me\n")
    built = "services:\n  t:\n    build: {build}\n    command: python t.py\n"
    (tmp_path / "ok.yaml").write_text(built.format(build="app"))
    assert not {"run_as_root", "user_unknown"} & set(_found(tmp_path / "ok.yaml"))
    (tmp_path / "app" / "Dockerfile.root").write_text("FROM python:3.12\n")
    (tmp_path / "root.yaml").write_text(built.format(build="{context: app, dockerfile: Dockerfile.root}"))
    assert _found(tmp_path / "root.yaml")["run_as_root"] == [(3, "warning")]
    (tmp_path / "elsewhere.yaml").write_text(built.format(build="../missing"))
    assert _found(tmp_path / "elsewhere.yaml")["user_unknown"] == [(3, "info")]


def test_gpus_held_after_the_work_in_every_format(tmp_path: Path) -> None:
    # Real files: a GPU test pod that loops forever; Volcano MPI workers that run sshd -D with no CompleteJob policy.
    assert _found(CORPUS / "vmware-gpus-k8s-gputest-pod.yml")["gpus_held"] == [(15, "warning")]
    assert [sev for _, sev in _found(CORPUS / "volcano-mindspore-gpu.yaml")["gpus_held"]] == ["warning"]
    # A Deployment of 8-GPU pods running sshd -D (command and args apart) for a launcher outside the file.
    sshd = _found(CORPUS / "gpt-neox-2021-deploy_k8s.yml")
    assert sshd["gpus_held"] == [(21, "warning")] and sshd["shm_default"] == [(19, "warning")]
    held = {
        "s.sbatch": "#!/bin/bash\n#SBATCH --gpus-per-node=8\nsrun torchrun --nproc-per-node 8 t.py\nsleep infinity\n",
        "d.sh": "#!/bin/bash\ndocker run -d --gpus 1 --user 1000 img:1 bash -c 'python t.py; sleep 7200'\n",
        "sky.yaml": "resources: {accelerators: A100:1}\nrun: |\n  python t.py\n  sleep 3600\n",
    }
    for name, text in held.items():
        (tmp_path / name).write_text(text)
        assert "gpus_held" in _found(tmp_path / name), name
    fine = {
        "wait.sbatch": "#!/bin/bash\n#SBATCH --gpus-per-node=8\nsleep 30\nsrun torchrun --nproc-per-node 8 t.py\n",
        "cpu.sh": "#!/bin/bash\ndocker run -d --user 1000 img:1 sleep infinity\n",  # holds no GPU
        "loop.sh": "#!/bin/bash\ndocker run --gpus 1 --user 1000 img:1 bash -c 'while true; do python t.py && break; done'\n",
    }
    for name, text in fine.items():
        (tmp_path / name).write_text(text)
        assert "gpus_held" not in _found(tmp_path / name), name
    mpijob = _lint(
        tmp_path,
        "mpi.yaml",
        """
        apiVersion: kubeflow.org/v2beta1
        kind: MPIJob
        metadata: {name: m}
        spec:
          slotsPerWorker: 1
          mpiReplicaSpecs:
            Launcher:
              replicas: 1
              template:
                spec:
                  containers:
                  - {name: l, image: img:1, command: [mpirun, -np, "2", python, t.py]}
            Worker:
              replicas: 2
              template:
                spec:
                  containers:
                  - name: w
                    image: img:1
                    command: [/usr/sbin/sshd, -De]
                    resources: {limits: {nvidia.com/gpu: 1}}
        """,
    )
    # The MPI operator removes the workers when the launcher ends only under cleanPodPolicy Running or All;
    # its default, None, leaves them running sshd (tests/deploy/test_lint_mpi.py walks the policies).
    assert mpijob["gpus_held"] == [(20, "warning")]


def test_outputs_written_where_no_volume_keeps_them(tmp_path: Path) -> None:
    # Real files: ./checkpoints beside the pod's only volumes (/dev/shm, /local); --train_dir on an emptyDir.
    assert _found(CORPUS / "aws-fsdp-llama3_1_8b-pytorchjob.yaml")["outputs_off_volume"] == [(103, "warning")]
    assert _found(CORPUS / "mpi-operator-tf-benchmarks-imagenet-efs.yaml")["outputs_off_volume"] == [(55, "warning")]
    lost = _lint(
        tmp_path,
        "rm.sh",
        """
        #!/bin/bash
        docker run --rm --gpus 1 --user 1000 -v /data:/data img:1 \\
            torchrun --nproc-per-node 1 t.py --data /data --output_dir /results
        """,
    )
    assert lost["outputs_off_volume"] == [(3, "warning")]
    kept = {
        "on-volume.sh": "docker run --rm --gpus 1 --user 1000 -v $PWD:/w img:1 torchrun t.py --output_dir /w/out",
        "relative.sh": "docker run --rm --gpus 1 --user 1000 -v $PWD:/w -w /w img:1 torchrun t.py --save_dir ckpt",
        "bucket.sh": "docker run --rm --gpus 1 --user 1000 -v /d:/d img:1 torchrun t.py --output_dir s3://b/run",
    }
    for name, line in kept.items():
        (tmp_path / name).write_text(f"#!/bin/bash\n{line}\n")
        assert "outputs_off_volume" not in _found(tmp_path / name), name


_PYTORCHJOB = """
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: t}}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          securityContext: {{runAsUser: 1000, runAsNonRoot: true}}
          volumes: [{{name: ckpt, persistentVolumeClaim: {{claimName: ckpt}}}}]
          containers:
          - name: pytorch
            image: img:1.0{workdir}
            volumeMounts: [{{name: ckpt, mountPath: /ckpt}}]
            command: [python, train.py]
            args: [{args}]
"""


@pytest.mark.parametrize(
    ("args", "workdir", "lost"),
    [
        # relative paths of a command started without a launcher, from the image's working directory
        ("--model-prefix=outputs/net, --log=logs/train.log", "", True),
        ("--output_dir, ./out", "", True),
        # the same resolved against workingDir: on the volume, or not
        ("--output_dir, out", "\n            workingDir: /ckpt", False),
        ("--output_dir, out", "\n            workingDir: /workspace", True),
        ("--save_dir, /ckpt/run1", "", False),
        # --log names a level here, not a file
        ("--log, info", "", False),
    ],
)
def test_outputs_of_a_command_without_launcher_under_relative_paths(
    tmp_path: Path, args: str, workdir: str, lost: bool
) -> None:
    found = _lint(tmp_path, "job.yaml", _PYTORCHJOB.format(args=args, workdir=workdir))
    assert ("outputs_off_volume" in found) is lost, found


def test_a_gpu_shell_to_train_in_with_no_volume(tmp_path: Path) -> None:
    assert "no_log_volume" in _found(CORPUS / "llamafactory-docker-cuda-compose.yml")
    found = _lint(tmp_path, "it.sh", "#!/bin/bash\ndocker run -it --gpus 1 --user 1000 img:1 bash\n")
    assert found["no_log_volume"] == [(2, "warning")]
    cpu = _lint(tmp_path, "cpu.sh", "#!/bin/bash\ndocker run -it --user 1000 img:1 bash\n")
    assert "no_log_volume" not in cpu


def test_the_data_set_mounted_rather_than_in_the_image(tmp_path: Path) -> None:
    found = _lint(
        tmp_path,
        "Dockerfile",
        """
        FROM pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime
        RUN wget -q https://download.pytorch.org/whl/cu121/torch-2.3.0-cp311-linux_x86_64.whl && \\
            curl -fsSL https://bootstrap.pypa.io/get-pip.py -o get-pip.py
        RUN wget -q http://cs231n.stanford.edu/tiny-imagenet-200.zip && unzip tiny-imagenet-200.zip
        USER 1000
        """,
    )
    assert found["data_in_image"] == [(4, "warning")]  # the data set, not the software downloads
    copied = _lint(tmp_path, "copy.Dockerfile", "FROM python:3.12\nCOPY data/ /app/data\nUSER 1000\n")
    assert copied["data_in_image"] == [(2, "warning")]
    # COPY . of a build context that holds a data directory .dockerignore does not leave out.
    (tmp_path / "repo" / "data").mkdir(parents=True)
    (tmp_path / "repo" / "Dockerfile").write_text("FROM python:3.12\nCOPY . /app\nUSER 1000\n")
    assert _found(tmp_path / "repo" / "Dockerfile")["data_in_image"] == [(2, "warning")]
    (tmp_path / "repo" / ".dockerignore").write_text("data/\n")
    assert "data_in_image" not in _found(tmp_path / "repo" / "Dockerfile")
    read = "#!/bin/bash\ndocker run --rm --gpus 1 --user 1000 {mount} img:1 torchrun t.py --data_dir=/data/imagenet\n"
    (tmp_path / "baked.sh").write_text(read.format(mount="-v /ckpt:/ckpt"))
    assert _found(tmp_path / "baked.sh")["data_in_image"] == [(2, "warning")]
    (tmp_path / "mounted.sh").write_text(read.format(mount="-v /ckpt:/ckpt -v /mnt/imagenet:/data/imagenet:ro"))
    assert "data_in_image" not in _found(tmp_path / "mounted.sh")


@pytest.mark.parametrize(
    "source",
    [
        "data/english-spanish.csv",
        "train.parquet",
        "corpus/*.jsonl",
        "shards/train-00000-of-00008.tfrecord",
        "features.npy",
        "train-images-idx3-ubyte.gz",
        "data/train.json",  # a format configs use too, under a data-set word
    ],
)
def test_a_data_file_copied_into_the_image_by_its_format(tmp_path: Path, source: str) -> None:
    found = _lint(tmp_path, "Dockerfile", f"FROM python:3.12\nCOPY {source} /app/\nUSER 1000\n")
    assert found["data_in_image"] == [(2, "warning")]


@pytest.mark.parametrize(
    "source", ["model.h5", "config.json", "requirements.txt", "weights/model.bin", "src/data_utils.py", "vocab.txt"]
)
def test_models_configs_and_code_copied_into_the_image_are_not_data(tmp_path: Path, source: str) -> None:
    found = _lint(tmp_path, "Dockerfile", f"FROM python:3.12\nCOPY {source} /app/\nUSER 1000\n")
    assert "data_in_image" not in found


def test_a_timeout_torch_never_reads_is_a_belief_with_the_real_knob() -> None:
    found = {r.id.split(".")[-1]: r for r in lint_file(str(CORPUS / "yuisekinai-100_pretrain.sh")).results}
    belief = found["variable_not_read"]
    assert "TORCH_DISTRIBUTED_TIMEOUT" in belief.summary
    assert "timeout=datetime.timedelta(seconds=7200)" in (belief.remedy or "")


def test_a_ray_cluster_the_batch_script_waits_on_forever(tmp_path: Path) -> None:
    script = """
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --gpus-per-node=8
        head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
        srun --nodes=1 -w "$head" ray start --head --block &
        sleep 10
        srun --nodes=1 --exclude "$head" ray start --address "$head:6379" --block &
        python train.py
        {end}
        """
    held = _lint(tmp_path, "ray.sbatch", script.format(end="wait"))
    assert held["gpus_held"] == [(9, "warning")]
    assert "gpus_held" not in _lint(tmp_path, "done.sbatch", script.format(end="ray stop"))


def test_every_gpu_of_a_provisioned_node_is_counted_and_detectron2_launches(tmp_path: Path) -> None:
    task = """
        resources:
          accelerators: V100:4
        run: |
          docker run --rm --gpus all --user 1000 -v /d:/d img:1 \\
            python3 tools/train_net.py --config-file c.yaml --num-gpus 2
        """
    found = _lint(tmp_path, "sky.yaml", task)
    assert found["nproc_below_gpus"] == [(5, "warning")]  # 2 processes on a node of 4 V100s
    batch = """
        #!/bin/bash
        #SBATCH --gpus-per-node=8
        docker run --rm --gpus all --user 1000 -v /d:/d img:1 torchrun --nproc-per-node 8 t.py
        """
    assert not {"nproc_below_gpus", "nproc_exceeds_gpus"} & set(_lint(tmp_path, "b.sbatch", batch))
    # --num-gpus of another program is not detectron2's
    other = "#!/bin/bash\ndocker run --gpus 8 --user 1000 -v /d:/d img:1 python3 train_esm2.py --num-gpus 2\n"
    assert "nproc_below_gpus" not in _lint(tmp_path, "o.sh", other)


def test_ray_results_on_a_cluster_deleted_with_the_job(tmp_path: Path) -> None:
    job = """
        apiVersion: ray.io/v1
        kind: RayJob
        metadata: {{name: t}}
        spec:
          entrypoint: {entrypoint}
          shutdownAfterJobFinishes: true
          rayClusterSpec:
            headGroupSpec:
              rayStartParams: {{}}
              template:
                spec:
                  containers:
                  - name: ray-head
                    image: rayproject/ray:2.9.0-gpu
                    resources: {{limits: {{nvidia.com/gpu: 1}}}}
        """
    lost = _lint(tmp_path, "lost.yaml", job.format(entrypoint="python train.py"))
    assert lost["no_log_volume"] == [(13, "warning")]  # the head container
    kept = _lint(tmp_path, "kept.yaml", job.format(entrypoint="python train.py --storage-path s3://b/runs"))
    assert "no_log_volume" not in kept and "gpus_held" not in kept
    # Without shutdownAfterJobFinishes the RayCluster, and its GPUs, stay after the job.
    stays = _lint(
        tmp_path,
        "stays.yaml",
        job.format(entrypoint="python t.py").replace("shutdownAfterJobFinishes: true", "suspend: false"),
    )
    assert stays["gpus_held"] == [(5, "warning")]  # the RayJob spec, which does not say it


def test_serving_shards_and_one_rank_per_task_steps(tmp_path: Path) -> None:
    # TGI starts one shard per GPU: NUM_SHARD=4 against 2 GPUs.
    tgi = _found(CORPUS / "ai-on-gke-mixtral-tgi-deployment.yaml")
    assert tgi["nproc_exceeds_gpus"] == [(43, "error")]
    assert "nproc_exceeds_gpus" not in _found(CORPUS / "ai-on-gke-llama2-70b-tgi-deployment.yaml")  # 2 on 2
    steps = """
        #!/bin/bash
        #SBATCH --nodes=4
        #SBATCH --ntasks-per-node=8
        #SBATCH --exclusive
        srun --container-image nvcr.io/nvidia/pytorch:24.01-py3 python train.py --amp
        """
    assert _lint(tmp_path, "steps.sbatch", steps)["slurm_gpus_missing"] == [(5, "warning")]
    asked = steps.replace("#SBATCH --exclusive", "#SBATCH --gpus-per-node=8")
    assert "slurm_gpus_missing" not in _lint(tmp_path, "asked.sbatch", asked)


def test_a_per_node_variable_the_batch_shell_expands_once(tmp_path: Path) -> None:
    head = "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n"
    run = "torchrun --nnodes 2 --nproc-per-node 8 --node-rank {rank} --master-addr n1 t.py"
    once = {
        "direct": f"srun {run.format(rank='$SLURM_NODEID')}\n",
        "double": f'srun bash -c "{run.format(rank="$SLURM_PROCID")}"\n',
    }
    per_node = {
        "single": f"srun bash -c '{run.format(rank='$SLURM_NODEID')}'\n",
        "escaped": f'srun bash -c "{run.format(rank=chr(92) + "$SLURM_NODEID")}"\n',
        "in a variable": f"CMD='{run.format(rank='$SLURM_NODEID')}'\nsrun bash -c \"$CMD\"\n",
        "concatenated": f"A=n1\nsrun sh -c '{run.format(rank='$SLURM_NODEID')}'\"$A\"\n",
    }
    for name, line in once.items():
        (tmp_path / "x.sbatch").write_text(head + line)
        assert _found(tmp_path / "x.sbatch").get("node_rank_fixed") == [(4, "warning")], name
    for name, line in per_node.items():
        (tmp_path / "x.sbatch").write_text(head + line)
        assert "node_rank_fixed" not in _found(tmp_path / "x.sbatch"), name


@pytest.mark.parametrize(
    ("image", "unpinned"),
    [
        ("bert", False),  # built on the host (docker build -t bert): nothing pulls it
        ("maskrcnn:latest", False),
        ("ubuntu", True),  # an official image: pulled as ubuntu:latest
        ("python:latest", True),
        ("myorg/trainer", True),
    ],
)
def test_a_local_build_is_not_an_unpinned_pull(tmp_path: Path, image: str, unpinned: bool) -> None:
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\ndocker run --rm --gpus 1 --user 1000 -v /d:/d {image} python train.py\n")
    found = {r.id for r in lint_file(str(script)).results}
    assert ("lint.docker.latest_tag" in found) is unpinned, found


def test_a_long_sleep_before_the_work_holds_the_gpus_idle(tmp_path: Path) -> None:
    # Real file: a PyTorchJob whose Master and Worker (4 GPUs each) run `sleep 1000000 && ... launch_training.sh`.
    held = _found(CORPUS / "gradstats-dev-multinode-pytorchjob.yaml")["gpus_held"]
    assert held == [(20, "warning")]  # the Worker's same finding is merged into the Master's
    cases = {
        "first.sh": ("docker run --gpus 1 --user 1000 img:1 bash -c 'sleep 7200 && python t.py'", True),
        "between.sh": ("docker run --gpus 1 --user 1000 img:1 bash -c 'python t.py; sleep 3h; python eval.py'", True),
        "short.sh": ("docker run --gpus 1 --user 1000 img:1 bash -c 'sleep 60 && python t.py'", False),
        "poll.sh": (
            "docker run --gpus 1 --user 1000 img:1 bash -c 'until test -f /x/ready; do sleep 900; done; python t.py'",
            False,
        ),
        "cpu.sh": ("docker run --user 1000 img:1 bash -c 'sleep 7200 && python t.py'", False),  # holds no GPU
    }
    for name, (command, expected) in cases.items():
        (tmp_path / name).write_text("#!/bin/bash\n" + command + "\n")
        assert ("gpus_held" in _found(tmp_path / name)) is expected, name


JOBSET_MPI = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: osu}
spec:
  POLICY
  replicatedJobs:
  - name: launcher
    template:
      spec:
        template:
          spec:
            containers:
            - {name: l, image: "img:1", command: [mpirun, -np, "2", ./osu_bw], resources: {limits: {nvidia.com/gpu: 1}}}
  - name: worker
    replicas: 2
    template:
      spec:
        template:
          spec:
            containers:
            - name: w
              image: "img:1"
              command: [/usr/sbin/sshd, -D]
              resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.mark.parametrize(
    ("policy", "held"),
    [
        ("", True),  # JobSet's default: success waits for every replicatedJob, and the sshd workers never end
        ("successPolicy: {operator: All}", True),
        ("successPolicy: {operator: All, targetReplicatedJobs: [launcher]}", False),
        ("successPolicy: {operator: Any}", False),
        ("successPolicy: {operator: Any, targetReplicatedJobs: [worker]}", True),
    ],
)
def test_sshd_workers_of_a_jobset_are_held_unless_its_success_policy_ends_them(
    tmp_path: Path, policy: str, held: bool
) -> None:
    found = _lint(tmp_path, "js.yaml", JOBSET_MPI.replace("POLICY", policy or "suspend: false"))
    assert ("gpus_held" in found) is held, found


def test_a_training_runtimes_own_gpu_workers_that_run_sshd_forever_are_held() -> None:
    # Real file: an MPI ClusterTrainingRuntime whose workers ask for their own GPU and run sshd -D, with no
    # successPolicy: the JobSet a TrainJob makes of it waits for them after the launcher's benchmarks end.
    assert _found(CORPUS / "odh-osu-mpi-runtime-gpu.yaml")["gpus_held"] == [(84, "warning")]
    # kubeflow/trainer's own runtime: the nodes' GPUs come from the TrainJob, and the launcher ends the JobSet.
    assert "gpus_held" not in _found(CORPUS / "trainer-runtime-deepspeed-distributed.yaml")


def test_a_removed_gpu_container_with_only_inputs_mounted_loses_its_outputs(tmp_path: Path) -> None:
    # Real files: train.py run with only its code and data mounted; an interactive NGC shell with only COCO
    # mounted; a SageMaker-style image's `train` entry point with only /opt/ml/input/data mounted.
    assert _found(CORPUS / "backurs-nlp-nvidia_docker.sh")["outputs_unmounted"] == [(4, "warning")]
    assert _found(CORPUS / "dle-maskrcnn-docker-interactive.sh")["outputs_unmounted"] == [(6, "warning")]
    assert _found(CORPUS / "yolov5-sagemaker-train_local.sh")["outputs_unmounted"] == [(5, "warning")]
    run = "docker run --rm --gpus 1 --user 1000 {volumes} img:1 {command}\n"
    cases = {
        ("-v /d/coco:/coco", "python train.py"): True,
        ("-v /d:/data -v $PWD:/src", "python /src/train.py"): True,  # the code: read, not the working directory
        ("-v /d:/data -v $PWD:/w:ro", "bash finetune.sh"): True,
        ("-v /d:/data -v $PWD:/src -w /src", "python /src/train.py"): False,  # relative outputs land in /src
        ("-v /d:/data -v $PWD/out:/out", "python train.py"): False,  # somewhere to write
        ("-v /d:/data", "python serve.py"): False,  # no training
        ("-v /d:/data", "python train.py --output_dir /results"): False,  # named: outputs_off_volume judges it
    }
    for (volumes, command), lost in cases.items():
        (tmp_path / "run.sh").write_text("#!/bin/bash\n" + run.format(volumes=volumes, command=command))
        assert ("outputs_unmounted" in _found(tmp_path / "run.sh")) is lost, (volumes, command)
    (tmp_path / "kept.sh").write_text(
        "#!/bin/bash\ndocker run --gpus 1 --user 1000 -v /d:/data img:1 python train.py\n"
    )
    assert "outputs_unmounted" not in _found(tmp_path / "kept.sh")  # no --rm: the stopped container keeps them
