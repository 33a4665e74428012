from __future__ import annotations

import os
import shlex
import typing
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from ddp_doctor.cli import main
from ddp_doctor.deploy import spec as specs
from tests.conftest import run_cli
from tests.deploy.specs import CASES, SPECS, extra_flags, golden_path

K8S_VERSION = "1.34.0"  # the Kubernetes schema kubernetes-validate checks against (pinned in pyproject)
CRD = Path(__file__).resolve().parents[2] / "src" / "ddp_doctor" / "deploy" / "schemas" / "pytorchjob-crd.yaml"


def generate(spec: str, target: str, capsys: pytest.CaptureFixture[str]) -> str:
    flags = SPECS[spec]
    cut = flags.index("--") if "--" in flags else len(flags)
    argv = ["launch", "--target", target, *flags[:cut], *extra_flags(spec, target), *flags[cut:]]
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(("spec", "target"), CASES)
def test_golden(spec: str, target: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = generate(spec, target, capsys)
    path = golden_path(spec, target)
    if os.environ.get("DDP_DOCTOR_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing; run with DDP_DOCTOR_UPDATE_GOLDEN=1 and review the diff"
    assert text == path.read_text(), f"{target} output for {spec} differs from {path}"


def _k8s_docs(spec: str, target: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(golden_path(spec, target).read_text()) if d]


@pytest.mark.parametrize("spec", [s for s, t in CASES if t == "k8s"])
def test_k8s_job_validates_against_kubernetes_openapi(spec: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    docs = _k8s_docs(spec, "k8s")
    assert [d["kind"] for d in docs] == (["Service", "Job"] if spec.startswith(("4x8", "2x8")) else ["Job"])
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    # The validator is not a rubber stamp: a typo in a field fails the same call.
    broken = docs[-1]
    broken["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


@pytest.mark.parametrize("spec", [s for s, t in CASES if t == "pytorchjob"])
def test_pytorchjob_validates_against_crd_and_pod_schema(spec: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    crd = yaml.safe_load(CRD.read_text())
    assert "kubeflow/training-operator" in crd["source"]
    (job,) = _k8s_docs(spec, "pytorchjob")
    jsonschema.validate(job, crd["openAPIV3Schema"])
    replicas = job["spec"]["pytorchReplicaSpecs"]
    for replica in replicas.values():
        template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "t"},
            "template": replica["template"],
        }
        kubernetes_validate.validate(template, K8S_VERSION, strict=True)
        (container,) = replica["template"]["spec"]["containers"]
        assert container["name"] == "pytorch"  # the operator requires this name and reads the port from it
        assert {"name": "pytorchjob-port", "containerPort": 29500} in container["ports"]
        limit = container["resources"]["limits"]["nvidia.com/gpu"]
        assert job["spec"]["nprocPerNode"] == str(limit)
    assert sum(r["replicas"] for r in replicas.values()) == (4 if spec.startswith("4x8") else 1)
    if "elastic" in spec:
        assert job["spec"]["elasticPolicy"]["minReplicas"] == 2 and list(replicas) == ["Worker"]
    bad = {**job, "spec": {**job["spec"], "nprocPerNode": 8}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, crd["openAPIV3Schema"])


def test_docker_script_is_valid_shell_with_the_right_flags() -> None:
    text = golden_path("1x8", "docker").read_text()
    job = text.rsplit("\ndocker run ", 1)[1].split(" &\n", 1)[0]  # the job's run line (the last), to its `&`
    argv = ["docker", "run", *shlex.split(job.replace("\\\n", " "))]
    assert argv[:2] == ["docker", "run"] and "--gpus" in argv and argv[argv.index("--gpus") + 1] == "8"
    assert argv[argv.index("--shm-size") + 1] == "32g" and "memlock=-1" in argv
    assert argv[argv.index("--user") + 1] == "1000:1000"
    assert argv[-4:] == ["ddp-doctor", "check", "--nproc", "8"]
    multi = golden_path("4x8", "docker").read_text()
    assert "--network host" in multi and "${NODE_RANK:?" in multi and "--rdzv-endpoint" in multi


def test_docker_devices_and_ipc_host(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", "--target", "docker", "--image", "img:1", "--devices", "0,1", "--ipc-host"]) == 0
    out = capsys.readouterr().out
    assert "--gpus '\"device=0,1\"'" in out and "--ipc=host" in out and "--shm-size" not in out
    assert "--nproc 2" in out and "# --ipc:" in out


def test_slurm_rendezvous_on_first_node_of_allocation() -> None:
    text = golden_path("4x8", "slurm").read_text()
    assert "#SBATCH --nodes=4" in text and "#SBATCH --gpus-per-node=8" in text
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1' in text
    assert "srun" in text and '--node-rank "$SLURM_NODEID"' in text
    script = golden_path("4x8-elastic-script", "slurm").read_text()
    assert "torchrun --nnodes 2:4 --nproc-per-node 8 --rdzv-backend c10d" in script
    assert "#SBATCH --nodes=2-4" in script


def test_bad_flags_exit_2_with_one_line() -> None:
    for argv in (
        ["--target", "k8s"],  # no image
        ["--target", "k8s", "--image", "i:1", "--devices", "0,1"],
        ["--target", "docker", "--image", "i:1", "--data", "pvc:x:/data"],
        ["--target", "docker", "--image", "i:1", "--shm-size", "lots"],
        ["--target", "docker", "--image", "i:1", "--name", "Bad_Name"],
        ["--target", "docker", "--image", "i:1", "--", "stray"],
    ):
        proc = run_cli("launch", *argv)
        assert proc.returncode == 2, (argv, proc.stdout)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


# Each refused input and the words its one-line error must contain.
REFUSED = [
    (["--uid", "0"], "--uid 0 runs the job as root"),
    (["--gid", "0"], "--gid 0 runs the job as root"),
    (["--uid", "-1"], "--uid -1 is not a Linux id; expected 1..2147483647"),
    (["--gid", str(2**31)], "--gid 2147483648 is not a Linux id"),
    (["--namespace", "BAD_NS"], "--namespace 'BAD_NS' is not a DNS-1123 label"),
    (["--namespace", "ns-"], "is not a DNS-1123 label"),
    (["--namespace", "n" * 64], "at most 63 characters"),
    (["--name", "9lives"], "--name '9lives' is not a DNS label"),
    (["--name", "a" * 53], "at most 52 characters"),
    (["--image", "has space:1"], "is not an image reference"),
    (["--image", "UPPER/case:1"], "is not an image reference"),
    (["--cpus", "0"], "--cpus 0: expected 1 or more"),
    (["--memory", "0"], "--memory is 0 bytes"),
    (["--shm-size", "0"], "--shm-size is 0 bytes"),
    (["--rdzv-port", "70000"], "--rdzv-port 70000 is outside 1..65535"),
    (["--data", "/d:/logs"], "mount target /logs: two mounts name it"),
    (["--data", "/d:/dev/shm"], "mount target /dev/shm"),
]


@pytest.mark.parametrize(("flags", "words"), REFUSED)
def test_launch_refuses_what_cannot_run_with_one_line(flags: list[str], words: str, tmp_path: Path) -> None:
    out = tmp_path / "job.yaml"
    argv = ["launch", "--target", "k8s", *(["--image", "img:1"] if "--image" not in flags else []), *flags]
    proc = run_cli(*argv, "-o", str(out))
    assert proc.returncode == 2, (flags, proc.stdout)
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not out.exists()  # nothing written


def test_allow_root_writes_a_pod_the_kubelet_starts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", "--target", "k8s", "--image", "img:1", "--uid", "0", "--gid", "0", "--allow-root"]) == 0
    pod = yaml.safe_load(capsys.readouterr().out)["spec"]["template"]["spec"]
    # runAsNonRoot beside runAsUser 0 is refused by the kubelet (CreateContainerConfigError): neither level says it.
    assert pod["securityContext"]["runAsUser"] == 0 and "runAsNonRoot" not in pod["securityContext"]
    assert "runAsNonRoot" not in pod["containers"][0]["securityContext"]
    assert main(["launch", "--target", "docker", "--image", "img:1", "--uid", "0", "--allow-root"]) == 0
    script = capsys.readouterr().out
    assert "--user 0:1000" in script and "unprivileged" not in script and "runs as root (--allow-root)" in script


@pytest.mark.parametrize(("spec", "target"), CASES)
def test_every_generated_file_says_what_the_image_must_contain(spec: str, target: str) -> None:
    text = golden_path(spec, target).read_text()
    if "--watch" in SPECS[spec]:
        assert (
            "The image must contain torch (torchrun) and train.py, and ddp-doctor for the preflight and ddp-doctor run"
            in text
        )
    elif "--script" in SPECS[spec]:
        assert "The image must contain torch (torchrun) and train.py." in text
    else:
        assert "The image must contain ddp-doctor and torch" in text


def test_spec_file_and_output_file(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "image: ghcr.io/me/train:1.0\nnodes: 2\ngpus_per_node: 4\nshm_size: 8g\n"
        "env:\n  NCCL_IB_DISABLE: '1'\nscript: train.py\nscript_args: [--epochs, '2']\n"
    )
    out = tmp_path / "job.k8s.yaml"
    proc = run_cli("launch", "--target", "k8s", "--spec", str(spec), "--nodes", "3", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    docs = list(yaml.safe_load_all(out.read_text()))
    job = docs[-1]
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert job["spec"]["completions"] == 3  # the flag overrides the file
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 4 and "--nproc-per-node" in c["args"]
    assert {"name": "NCCL_IB_DISABLE", "value": "1"} in c["env"]
    assert job["spec"]["template"]["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "8Gi"
    spec.write_text("image: x\nnodez: 2\n")
    proc = run_cli("launch", "--target", "k8s", "--spec", str(spec))
    assert proc.returncode == 2 and "nodez" in proc.stderr


def test_user_dollars_are_not_expanded_by_compose_or_kubernetes(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--image", "img:1", "--env", "GREETING=$(whoami) $HOME", "--script", "t.py", "--", "--x", "$(id) $HOME"]
    assert main(["launch", "--target", "compose", *args]) == 0
    svc = next(iter(yaml.safe_load(capsys.readouterr().out)["services"].values()))
    assert svc["command"][-2:] == ["--x", "$$(id) $$HOME"] and svc["environment"]["GREETING"] == "$$(whoami) $$HOME"
    assert main(["launch", "--target", "k8s", *args]) == 0
    c = yaml.safe_load(capsys.readouterr().out)["spec"]["template"]["spec"]["containers"][0]
    assert c["args"][-2:] == ["--x", "$$(id) $HOME"]
    assert {"name": "GREETING", "value": "$$(whoami) $HOME"} in c["env"]
    assert main(["launch", "--target", "k8s", "--image", "img:1", "--nodes", "2"]) == 0
    c = yaml.safe_load_all(capsys.readouterr().out).__next__()  # the Service
    assert c["kind"] == "Service"


def test_the_spec_fields_are_launch_specs_fields_with_their_types() -> None:
    """A spec file and the flags fill SpecFields, which becomes one LaunchSpec; a field added to one and
    not the other, or typed differently, would be set by neither or refused only at run time."""
    assert typing.get_type_hints(specs.SpecFields) == typing.get_type_hints(specs.LaunchSpec)
    values = specs.from_mapping(
        {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "devices": [0, 1], "time": "30"}, "t.yaml"
    )
    spec = specs.build(values)
    assert (spec.gpus_per_node, spec.devices, spec.time_limit) == (2, ("0", "1"), "30")
