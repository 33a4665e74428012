"""lint finds every pod template whatever kind nests it (real Volcano, MPIJob, RayJob, Argo and
ElasticJob files), says the kind and the path of each container, and knows the roles of the pods
(an MPI launcher, the pods that run the ranks, a Ray head)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddp_doctor.deploy.lint.engine import lint_file
from tests.conftest import FIXTURES, run_cli

REAL = FIXTURES / "deploy" / "real"


def _found(path: Path) -> dict[str, list[tuple[int, str, str]]]:
    out: dict[str, list[tuple[int, str, str]]] = {}
    for r in lint_file(str(path)).results:
        out.setdefault(r.id.split(".")[-1], []).append(
            (r.evidence[0].line or 0, str(r.observed["severity"]), str(r.observed["unit"]))
        )
    return out


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_every_real_file_is_read_and_its_containers_named_by_kind_and_path() -> None:
    expected = {
        "volcano-mpi-example.yaml": [
            "Job/lm-mpi-job task mpimaster container mpimaster (spec.tasks[0].template.spec.containers[0])",
            "Job/lm-mpi-job task mpiworker container mpiworker (spec.tasks[1].template.spec.containers[0])",
        ],
        "mpijob-tensorflow-benchmarks.yaml": [
            (
                "MPIJob/tensorflow-benchmarks Launcher container tensorflow-benchmarks "
                "(spec.mpiReplicaSpecs.Launcher.template.spec.containers[0])"
            ),
            (
                "MPIJob/tensorflow-benchmarks Worker container tensorflow-benchmarks "
                "(spec.mpiReplicaSpecs.Worker.template.spec.containers[0])"
            ),
        ],
        "rayjob-pytorch-text-classifier.yaml": [
            (
                "RayJob/pytorch-text-classifier- head container ray-head "
                "(spec.rayClusterSpec.headGroupSpec.template.spec.containers[0])"
            )
        ],
        "elasticjob-imagenet.yaml": [
            "ElasticJob/imagenet container elasticjob-worker (spec.replicaSpecs.Worker.template.spec.containers[0])"
        ],
        "argo-scripts-bash.yaml": [
            "Workflow/scripts-bash- template gen-random-int container main (spec.templates[1].script)",
            "Workflow/scripts-bash- template print-message container main (spec.templates[2].container)",
        ],
    }
    for name, units in expected.items():
        found = lint_file(str(REAL / name))
        assert [u.name for u in found.units] == units, name
        assert not found.notes, name


def test_mpi_roles_the_workers_run_the_ranks_the_launcher_does_not() -> None:
    """Volcano's hand-made MPI (mpiexec in one task, sshd in the other) and an MPIJob alike."""
    volcano = {u.name.split(" container ")[0]: u for u in lint_file(str(REAL / "volcano-mpi-example.yaml")).units}
    master, worker = volcano["Job/lm-mpi-job task mpimaster"], volcano["Job/lm-mpi-job task mpiworker"]
    assert master.role == "launcher" and not master.trains
    assert worker.role == "ranks" and worker.trains and worker.launches[0].tool == "mpirun"
    assert worker.nproc_declared is not None and worker.nproc_declared.value == "1"  # -np 2 over 2 worker pods
    found = _found(REAL / "volcano-mpi-example.yaml")
    assert all("mpiworker" in unit for rule in found.values() for _, _, unit in rule)
    assert "shm_default" not in found  # one rank per worker pod, no DataLoader workers named

    mpijob = _found(REAL / "mpijob-tensorflow-benchmarks.yaml")
    assert [(line, sev) for line, sev, _ in mpijob["latest_tag"]] == [(15, "warning")]  # both images, one finding
    assert all("Worker" in unit for _, _, unit in mpijob["run_as_root"])  # the launcher is not judged as a rank
    assert "nproc_below_gpus" not in mpijob and "nproc_exceeds_gpus" not in mpijob  # slotsPerWorker 1, 1 GPU


def test_rayjob_head_with_a_gpu_is_checked_and_kuberay_supplies_dev_shm() -> None:
    found = _found(REAL / "rayjob-pytorch-text-classifier.yaml")
    assert found["runtime_class_missing"][0][0] == 29
    assert "run_as_root" not in found  # rayproject/ray images run as the user ray
    assert "shm_default" not in found  # KubeRay mounts a memory-backed /dev/shm into the Ray container
    assert "gpu_limit_missing" not in found


def test_argo_gpu_limit_from_pod_spec_patch_and_pvc_volumes() -> None:
    found = _found(REAL / "argo-sd-finetune-workflow-template.yaml")
    assert "gpu_limit_missing" not in found  # podSpecPatch sets nvidia.com/gpu: "{{inputs.parameters.gpu_count}}"
    assert "no_log_volume" not in found  # the template mounts its PVC
    assert found["runtime_class_missing"][0][2].endswith(
        "template model-finetuner container main (spec.templates[2].container)"
    )


def test_an_unknown_kind_with_a_pod_template_is_checked() -> None:
    """torchelastic's ElasticJob: no handler knows it; its args are torchrun's (the image's ENTRYPOINT)."""
    found = lint_file(str(REAL / "elasticjob-imagenet.yaml"))
    (unit,) = found.units
    assert unit.trains and unit.launches[0].tool == "torchrun" and unit.launches[0].workers is not None
    assert unit.gpus is not None and unit.gpus.value == 1
    rules = {r.id for r in found.results}
    assert "lint.k8s.run_as_root" in rules and "lint.k8s.nnodes_mismatch" not in rules  # the controller sets --nnodes


def test_lists_cronjobs_kueue_and_helm_output(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "rendered.yaml",
        """
        # Source: train/templates/cron.yaml
        ---
        apiVersion: v1
        kind: List
        items:
        - apiVersion: batch/v1
          kind: CronJob
          metadata: {name: nightly}
          spec:
            schedule: "0 3 * * *"
            jobTemplate:
              spec:
                parallelism: 2
                completions: 2
                completionMode: Indexed
                template:
                  spec:
                    containers:
                    - name: t
                      image: img:1
                      command: [torchrun, --nproc-per-node=2, --backend=nccl, t.py]
        ---
        # Source: train/templates/job.yaml
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: queued
          labels: {kueue.x-k8s.io/queue-name: team-a}
        spec:
          suspend: true
          template:
            spec:
              containers:
              - name: t
                image: img:1
                command: [torchrun, --nproc-per-node=1, t.py]
                resources: {limits: {nvidia.com/gpu: 1}}
        """,
    )
    found = _found(path)
    assert found["nnodes_mismatch"][0][0] == 21  # CronJob: 2 pods, torchrun without --nnodes
    assert found["gpu_limit_missing"][0][1] == "error"
    names = [u.name for u in lint_file(str(path)).units]
    assert names == [
        "CronJob/nightly container t (spec.jobTemplate.spec.template.spec.containers[0])",
        "Job/queued container t (spec.template.spec.containers[0])",
    ]


def test_what_the_kubelet_and_api_server_refuse(tmp_path: Path) -> None:
    """What `launch` refuses, lint reports: runAsUser 0 under runAsNonRoot, ids out of range, bad names;
    and nprocPerNode that torchrun's own flag overrides."""
    path = _write(
        tmp_path,
        "pj.yaml",
        """
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        metadata: {name: train, namespace: BAD_NS}
        spec:
          nprocPerNode: '4'
          pytorchReplicaSpecs:
            Worker:
              replicas: 2
              template:
                spec:
                  securityContext: {runAsNonRoot: true, runAsUser: 0}
                  containers:
                  - name: pytorch
                    image: img:1
                    command: [torchrun, --nproc-per-node, "8", t.py]
                    resources: {limits: {nvidia.com/gpu: 8}}
                    securityContext: {runAsGroup: -1}
        """,
    )
    found = _found(path)
    assert found["non_root_conflict"] == [(11, "error", found["non_root_conflict"][0][2])]
    assert "run_as_root" not in found  # the pod never starts: one finding says so
    assert [(line, sev) for line, sev, _ in found["invalid_id"]] == [(17, "error")]
    assert [(line, sev) for line, sev, _ in found["invalid_name"]] == [(3, "error")]
    assert [(line, sev) for line, sev, _ in found["nproc_conflict"]] == [(5, "warning")]
    proc = run_cli("lint", str(path))
    assert proc.returncode == 1 and "BAD_NS" in proc.stdout


def test_run_as_user_minus_one_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "job.yaml",
        """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: t}
        spec:
          template:
            spec:
              securityContext: {runAsUser: -1, runAsNonRoot: true}
              containers:
              - {name: t, image: "img:1", command: [torchrun, t.py]}
        """,
    )
    assert _found(path)["invalid_id"][0][:2] == (7, "error")


def test_an_argo_resource_templates_manifest_is_checked_at_its_lines(tmp_path: Path) -> None:
    """`resource.manifest` is a YAML string of the object the step creates: its containers run like any other."""
    path = _write(
        tmp_path,
        "wf.yaml",
        """
        apiVersion: argoproj.io/v1alpha1
        kind: Workflow
        metadata:
          generateName: train-
        spec:
          entrypoint: train
          templates:
          - name: train
            resource:
              action: create
              manifest: |
                apiVersion: kubeflow.org/v1
                kind: PyTorchJob
                metadata:
                  generateName: train-{{workflow.name}}-
                spec:
                  pytorchReplicaSpecs:
                    Worker:
                      replicas: 2
                      template:
                        spec:
                          containers:
                          - name: pytorch
                            image: registry.local/train:latest
                            command: [torchrun, --nproc-per-node, "2", train.py]
                            resources:
                              limits: {nvidia.com/gpu: 1}
          - name: broken
            resource:
              action: create
              manifest: "{{inputs.parameters.manifest}}: ["
        """,
    )
    found = _found(path)
    assert [line for line, *_ in found["latest_tag"]] == [24]
    assert [line for line, *_ in found["nproc_exceeds_gpus"]] == [25]
    assert "PyTorchJob/train-{{workflow.name}}-" in found["latest_tag"][0][2]
    notes = lint_file(str(path)).notes
    assert any("Argo resource template's manifest" in n for n in notes), notes


@pytest.mark.parametrize("name", ["__LWS_NAME__", "<your-job>", "@JOB_NAME@", "%JOB%", "${JOB}", "{{ .Values.name }}"])
def test_a_name_left_to_a_template_is_judged_once_filled_in(tmp_path: Path, name: str) -> None:
    """A placeholder the project fills before applying the file (a Justfile's sed of __NAME__, envsubst,
    Helm) is no name the API server will see; the same name in capitals, written as is, is refused."""
    text = """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: "NAME"}
        spec:
          template:
            spec:
              containers:
              - {name: t, image: "img:1", command: [torchrun, t.py]}
        """
    assert "invalid_name" not in _found(_write(tmp_path, "job.yaml", text.replace("NAME", name)))
    assert "invalid_name" in _found(_write(tmp_path, "job.yaml", text.replace("NAME", "LWS_NAME")))


@pytest.mark.parametrize(
    ("where", "misplaced"),
    [
        ("containers:\n  - {name: t, image: 'img:1', command: [python, t.py], resources: {limits: {GPU: 1}}}", False),
        (  # an alpha proposal's fields the Pod API never had (the real file below)
            (
                "containers:\n  - {name: t, image: 'img:1', command: [python, t.py]}\n"
                "extendedResources: [{name: g, resources: {limits: {GPU: 1}}}]"
            ),
            True,
        ),
        ("resources: {limits: {GPU: 1}}\ncontainers:\n  - {name: t, image: 'img:1', command: [python, t.py]}", True),
        (  # node labels and taints name the resource without asking for it
            (
                "nodeSelector: {GPU: present}\ntolerations: [{key: GPU, operator: Exists}]\n"
                "containers:\n  - {name: t, image: 'img:1', command: [python, t.py], resources: {limits: {GPU: 1}}}"
            ),
            False,
        ),
    ],
)
def test_a_gpu_count_where_the_pod_api_reads_none(tmp_path: Path, where: str, misplaced: bool) -> None:
    spec = textwrap.indent(where.replace("GPU", "nvidia.com/gpu"), "      ")
    text = f"apiVersion: batch/v1\nkind: Job\nmetadata: {{name: t}}\nspec:\n  template:\n    spec:\n{spec}\n"
    path = tmp_path / "job.yaml"
    path.write_text(text)
    assert ("gpu_request_misplaced" in _found(path)) is misplaced
    if not misplaced:
        return
    real = _found(FIXTURES / "lint-corpus" / "k8s-gpu-examples-extended-resources-job.yaml")
    assert [(line, sev) for line, sev, _ in real["gpu_request_misplaced"]] == [(22, "warning")]


_ARGO_DAG = """
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  generateName: train-
spec:
  entrypoint: main
  templates:
  - name: main
    dag:
      tasks:
      - name: train
        template: train
      - name: package
        depends: train.Succeeded
        template: package
        arguments:
          parameters:
          - {name: run-id, value: "{{tasks.train.outputs.parameters.run-id}}"}
  - name: train
    outputs:
      parameters:
      - name: run-id
        valueFrom: {path: /tmp/run-id}
    container:
      image: registry.local/train:1.0
      command: [python, train.py]
  - name: package
    inputs:
      parameters:
      - name: run-id
    container:
      image: registry.local/train:1.0
      command: [python, package.py]
      env:
      - name: RUN_ID
        value: "VALUE"
"""


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        ("{{inputs.parameters.run-id}}", False),  # passed in by the DAG task's arguments
        ("{{workflow.name}}-{{pod.name}}", False),  # the workflow's globals and the pod's own name
        ("{{tasks.train.outputs.parameters.run-id}}", True),  # only the DAG template has tasks.*
        ("{{steps.train.outputs.result}}", True),
        ("{{=sprig.trim(inputs.parameters['run-id'])}}", False),  # an expression: not a variable tag
    ],
)
def test_an_argo_leaf_template_cannot_see_its_callers_variables(tmp_path: Path, value: str, refused: bool) -> None:
    """A container template is validated in a scope of its own inputs, pod.name, retries and the workflow's
    globals: a tasks.* or steps.* tag in it fails Argo's validation ('failed to resolve'); the same tag in the
    DAG task's arguments is fine."""
    path = _write(tmp_path, "wf.yaml", _ARGO_DAG.replace("VALUE", value))
    found = _found(path).get("argo_variable_out_of_scope")
    assert found == (
        [(36, "error", "Workflow/train- template package container main (spec.templates[2].container)")]
        if refused
        else None
    ), found
