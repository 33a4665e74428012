"""The Kubernetes kinds users are moving to: JobSet and Kubeflow Trainer v2's TrainJob + ClusterTrainingRuntime.

No cluster runs here. What can be checked without one is: each generated object against its project's
published CRD schema (pinned in tests/fixtures/deploy/crds with source, tag and commit; tests/deploy/pin_crd.py
made them), every field declared by that schema (an API server prunes an unknown field without a word, so a
typo would silently vanish), the embedded Job and pod templates against Kubernetes' own 1.34 schema, the
rules the API server's validation adds to a podFailurePolicy, and the failure policies against the exit codes
of knowledge/exitcodes.yaml."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from ddp_doctor.cli import main
from ddp_doctor.knowledge import exitcodes
from tests.conftest import FIXTURES, run_cli
from tests.deploy.specs import CASES, golden_path

K8S_VERSION = "1.34.0"
CRDS = FIXTURES / "deploy" / "crds"
JOBSET_SPECS = [s for s, t in CASES if t == "jobset"]
TRAINJOB_SPECS = [s for s, t in CASES if t == "trainjob"]


def crd(kind: str) -> dict[str, Any]:
    (path,) = [p for p in CRDS.glob("*.json") if json.loads(p.read_text())["kind"] == kind]
    return dict(json.loads(path.read_text()))


def undeclared(doc: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Keys of `doc` that `schema` does not declare (what an API server would prune)."""
    if schema.get("x-kubernetes-preserve-unknown-fields") or not isinstance(doc, (dict, list)):
        return []
    if isinstance(doc, list):
        items = schema.get("items", {})
        return [p for i, v in enumerate(doc) for p in undeclared(v, items, f"{path}[{i}]")]
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    out = []
    for key, value in doc.items():
        if props is not None and key in props:
            out += undeclared(value, props[key], f"{path}.{key}")
        elif isinstance(extra, dict):
            out += undeclared(value, extra, f"{path}.{key}")
        elif props is not None or extra is False:
            out.append(f"{path}.{key}")
    return out


def check_against_crd(doc: dict[str, Any]) -> None:
    pinned = crd(doc["kind"])
    assert doc["apiVersion"] == f"{pinned['group']}/{pinned['version']}"
    jsonschema.validate(doc, pinned["openAPIV3Schema"])
    assert not undeclared(doc, pinned["openAPIV3Schema"]), undeclared(doc, pinned["openAPIV3Schema"])


def check_job(job_spec: dict[str, Any]) -> None:
    """A JobSet's child Job against Kubernetes' batch/v1 schema, plus the API server's podFailurePolicy rules."""
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": job_spec}
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    pod = job_spec["template"]["spec"]
    names = {c["name"] for c in (*pod.get("initContainers", []), *pod["containers"])}
    for rule in job_spec.get("podFailurePolicy", {}).get("rules", []):
        # kubernetes pkg/apis/batch/validation: restartPolicy Never, a known container, sorted unique values,
        # and 0 never listed with In (a container that exited 0 did not fail).
        assert pod["restartPolicy"] == "Never"
        on = rule.get("onExitCodes")
        if on:
            assert on["containerName"] in names, (on, names)
            assert on["values"] == sorted(set(on["values"]))
            assert not (on["operator"] == "In" and 0 in on["values"])


def docs(spec: str, target: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(golden_path(spec, target).read_text()) if d]


@pytest.mark.parametrize("spec", JOBSET_SPECS)
def test_jobset_validates_against_its_crd_and_kubernetes(spec: str) -> None:
    (jobset,) = docs(spec, "jobset")
    check_against_crd(jobset)
    (rjob,) = jobset["spec"]["replicatedJobs"]
    job = rjob["template"]["spec"]
    check_job(job)
    nodes = 4 if spec.startswith("4x8") else 2 if spec.startswith("2x8") else 1
    assert (rjob["replicas"], job["completions"], job["parallelism"], job["completionMode"]) == (
        1,
        nodes,
        nodes,
        "Indexed",
    )
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    args = job["template"]["spec"]["containers"][0]["args"]
    if nodes > 1:  # node 0 under JobSet's hostname scheme: NAME-REPLICATEDJOB-JOBINDEX-PODINDEX.SUBDOMAIN
        name = jobset["metadata"]["name"]
        assert f"{name}-node-0-0.{name}:29500" in args and "$(NODE_RANK)" in args


@pytest.mark.parametrize("spec", TRAINJOB_SPECS)
def test_trainjob_and_its_runtime_validate_against_their_crds(spec: str) -> None:
    runtime, trainjob = docs(spec, "trainjob")
    assert (runtime["kind"], trainjob["kind"]) == ("ClusterTrainingRuntime", "TrainJob")
    check_against_crd(runtime)
    check_against_crd(trainjob)
    assert "namespace" not in runtime["metadata"]  # cluster-scoped
    ref = trainjob["spec"]["runtimeRef"]
    assert ref == {
        "name": runtime["metadata"]["name"],
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert runtime["spec"]["mlPolicy"]["torch"] == {}
    (rjob,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    # The Trainer finds its step by this label and puts the TrainJob's image and command into the container `node`.
    assert rjob["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    check_job(rjob["template"]["spec"])
    (node,) = rjob["template"]["spec"]["template"]["spec"]["containers"]
    assert node["name"] == "node"
    trainer = trainjob["spec"]["trainer"]
    assert trainer["numNodes"] == runtime["spec"]["mlPolicy"]["numNodes"]
    assert trainer["resourcesPerNode"] == node["resources"]
    assert trainer["numProcPerNode"] == node["resources"]["limits"]["nvidia.com/gpu"]
    words = trainer["command"] + trainer["args"]
    if trainer["numNodes"] > 1:  # the torch plugin's variables, expanded by Kubernetes in the container
        assert "$(PET_MASTER_ADDR):$(PET_MASTER_PORT)" in words and "$(PET_NODE_RANK)" in words, words


def test_a_typo_is_caught_though_the_api_server_would_prune_it() -> None:
    (jobset,) = docs("1x8", "jobset")
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurPolicy"] = {"rules": []}
    with pytest.raises(AssertionError, match="podFailurPolicy"):
        check_against_crd(jobset)
    _, trainjob = docs("1x8", "trainjob")
    trainjob["spec"]["trainer"]["numProcPerNode"] = "auto"  # v2.3.0 takes an integer
    with pytest.raises(jsonschema.ValidationError):
        check_against_crd(trainjob)


@pytest.mark.parametrize("target", ["k8s", "jobset", "trainjob"])
def test_the_failure_policies_come_from_the_exit_code_table(target: str) -> None:
    found = docs("2x8-watch-preflight", target)
    job = {
        "k8s": lambda: found[-1]["spec"],
        "jobset": lambda: found[0]["spec"]["replicatedJobs"][0]["template"]["spec"],
        "trainjob": lambda: found[0]["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"],
    }[target]()
    container = "node" if target == "trainjob" else "trainer"
    rules = job["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "FailJob",
        "onExitCodes": {"containerName": "preflight", "operator": "NotIn", "values": [0]},
    }
    by_code = {
        r["onExitCodes"]["values"][0]: r["action"]
        for r in rules
        if r.get("onExitCodes", {}).get("containerName") == container
    }
    table = exitcodes.actions()
    assert {a.kind for a in table} == {"job_failed", "hang", "infrastructure"}
    if target == "k8s":
        assert by_code == {a.code: a.job for a in table} == {1: "FailJob", 10: "Count", 11: "Ignore"}
        assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]} in rules
        assert job["backoffLimit"] == 1  # a hang is retried once
        return
    # In a JobSet the child Job fails at once and the set's policy acts on the exit code its message names.
    assert by_code == {a.code: "FailJob" for a in table} and job["backoffLimit"] == 0
    policy = (found[0]["spec"] if target == "jobset" else found[0]["spec"]["template"]["spec"])["failurePolicy"]
    actions = {r["name"]: r["action"] for r in policy["rules"]}
    assert actions == {
        "preflight": "FailJobSet",
        "job_failed": "FailJobSet",
        "hang": "RestartJobSet",
        "infrastructure": "RestartJobSet",
    }
    for rule in policy["rules"]:
        assert re.match(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", rule["name"])  # JobSet's rule-name pattern
        assert rule["onJobFailureReasons"] == ["PodFailurePolicy"]
    # The message the Job controller writes for a FailJob rule (pkg/controller/job/pod_failure_policy.go).
    message = f"Container {container} for pod ns/train-2x8-node-0-1-x7k2 failed with exit code 11 matching FailJob rule at index 3"
    matching = [
        r["name"] for r in policy["rules"] if any(re.search(p, message) for p in r["onJobFailureMessagePatterns"])
    ]
    assert matching == ["infrastructure"]


def test_a_named_runtime_is_referenced_not_written(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["launch", "--target", "trainjob", "--image", "img:1", "--runtime", "torch-distributed", "--nodes", "2"]
    assert main(argv) == 0
    (trainjob,) = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert trainjob["kind"] == "TrainJob" and trainjob["spec"]["runtimeRef"]["name"] == "torch-distributed"
    check_against_crd(trainjob)


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (
            ["--target", "pytorchjob", "--script", "t.py", "--watch"],
            "a PyTorchJob (kubeflow.org/v1) has no podFailurePolicy",
        ),
        (["--target", "k8s", "--watch"], "--watch needs --script"),
        (["--target", "k8s", "--runtime", "x"], "--runtime: for --target trainjob only"),
        (["--target", "trainjob", "--runtime", "x", "--preflight"], "the init container and the failure policy live"),
        (["--target", "jobset", "--nodes", "4", "--min-nodes", "2"], "--min-nodes: a jobset runs a fixed number"),
        (["--target", "trainjob", "--runtime", "Bad_Name"], "is not a Kubernetes object name"),
        (["--target", "k8s", "--preflight", "everything"], "invalid choice"),
        (["--target", "trainjob", "--env", "PET_NODE_RANK=3"], "Kubeflow Trainer's torch plugin sets it"),
    ],
)
def test_what_has_no_place_is_refused_with_one_line(flags: list[str], words: str) -> None:
    proc = run_cli("launch", "--image", "img:1", *flags)
    assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_live_preflight_runs_the_one_node_chain_within_the_bound(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["launch", "--target", "jobset", "--image", "img:1", "--gpus-per-node", "0", "--preflight", "live"]) == 0
    )
    (jobset,) = yaml.safe_load_all(capsys.readouterr().out)
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    argv = init["command"] + init["args"]
    assert argv == [
        "timeout",
        "-k",
        "5",
        "55",
        "ddp-doctor",
        "check",
        "--timeout",
        "45",
        "--nproc",
        "2",
        "--backend",
        "gloo",
    ]
    assert init["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert (
        init["resources"] == pod["containers"][0]["resources"]
        and init["volumeMounts"] == pod["containers"][0]["volumeMounts"]
    )


def test_the_pinned_crds_say_where_they_come_from() -> None:
    for path in CRDS.glob("*.json"):
        pinned = json.loads(path.read_text())
        assert re.search(
            r"github\.com/(kubeflow/trainer|kubernetes-sigs/jobset)/blob/v[\d.]+/.* \(tag v[\d.]+, commit [0-9a-f]{40}\)",
            pinned["source"],
        )
        assert pinned["version"] in path.name or pinned["source"].split("tag ")[1].split(",")[0] in path.name


def test_spec_file_keys(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("image: img:1\nscript: t.py\nwatch: true\npreflight: live\n")
    proc = run_cli("launch", "--target", "jobset", "--spec", str(spec))
    assert proc.returncode == 0, proc.stderr
    (jobset,) = yaml.safe_load_all(proc.stdout)
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    trainer = pod["containers"][0]
    assert [trainer["command"][0], *trainer["args"][:3]] == ["ddp-doctor", "run", "--exit-code", "verdict"]
    assert "--timeout" in pod["initContainers"][0]["args"]  # preflight: live


# What the kubelet keeps of a failed container's log as its termination message under FallbackToLogsOnError:
# the last 80 lines, at most 2048 bytes (kubernetes pkg/kubelet/container: MaxContainerTerminationMessageLogLines,
# MaxContainerTerminationMessageLogLength).
MESSAGE_LINES, MESSAGE_BYTES = 80, 2048


def test_a_failing_preflight_init_container_exits_with_the_verdict_and_says_why(tmp_path: Path) -> None:
    out = tmp_path / "job.yaml"
    flags = ["--gpus-per-node", "0", "--preflight", "--env", "GLOO_SOCKET_IFNAME=ens9", "--script", "t.py"]
    assert main(["launch", "--target", "k8s", "--image", "img:1", *flags, "-o", str(out)]) == 0
    (job,) = yaml.safe_load_all(out.read_text())
    (init,) = job["spec"]["template"]["spec"]["initContainers"]
    # The init container's own command line and environment, run as a real process (the image here: this host).
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "COLUMNS": "100"}
    env.update({e["name"]: e["value"] for e in init["env"] if "value" in e})
    started = time.monotonic()
    proc = subprocess.run(
        init["command"] + init["args"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr  # the check's FAIL: the job's podFailurePolicy FailJob rule matches it
    log = (proc.stdout + proc.stderr).encode()
    message = b"\n".join(log.splitlines()[-MESSAGE_LINES:])[-MESSAGE_BYTES:].decode(errors="replace")
    assert "GLOO_SOCKET_IFNAME=ens9 matches no interface" in message and "FAIL" in message, message
    assert "root cause: env.env_vars" in message, message
    print(f"preflight init container: exit {proc.returncode} after {took:.1f} s")


def test_compose_starts_the_job_only_after_its_preflight_passed() -> None:
    (project,) = docs("2x8-watch-preflight", "compose")
    services = project["services"]
    assert list(services) == ["preflight", "train-2x8"]
    check, job = services["preflight"], services["train-2x8"]
    assert check["command"] == ["timeout", "-k", "5", "55", "ddp-doctor", "check", "--static"]
    assert job["depends_on"] == {"preflight": {"condition": "service_completed_successfully"}}
    same = ("image", "user", "shm_size", "ulimits", "environment", "volumes", "deploy", "network_mode")
    assert {k: check[k] for k in same} == {k: job[k] for k in same}
    assert job["command"][:4] == ["ddp-doctor", "run", "--exit-code", "verdict"]


def test_a_pytorchjob_preflight_is_an_init_container_in_every_replica(capsys: pytest.CaptureFixture[str]) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    assert main(["launch", "--target", "pytorchjob", "--image", "img:1", "--nodes", "2", "--preflight", "live"]) == 0
    (job,) = yaml.safe_load_all(capsys.readouterr().out)
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        pod = replica["template"]["spec"]
        (init,) = pod["initContainers"]
        assert init["name"] == "preflight" and init["args"][3:6] == ["ddp-doctor", "check", "--timeout"]
        template = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": "t"},
            "template": replica["template"],
        }
        kubernetes_validate.validate(template, K8S_VERSION, strict=True)
