from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from ddp_doctor.cli import main
from ddp_doctor.commands.lint import lint
from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.deploy.lint.rules import LintRule, catalogue, rule_ids
from ddp_doctor.render import render
from ddp_doctor.report import Report, Status
from tests.conftest import FIXTURES, run_cli
from tests.deploy.specs import GOLDEN

BROKEN = FIXTURES / "deploy" / "broken"
EXPECTED = yaml.safe_load((FIXTURES / "deploy" / "broken-expected.yaml").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_pitfall_caught_at_its_line(name: str) -> None:
    found = lint_file(str(BROKEN / name))
    got = sorted(f"{r.id}@{r.evidence[0].line}" for r in found.results)
    assert got == sorted(EXPECTED[name])
    for r in found.results:
        assert r.summary.startswith(f"{BROKEN / name}:{r.evidence[0].line}: ")
        assert r.remedy and r.cause and r.observed["severity"] in ("error", "warning", "info")


def test_corpus_covers_the_issue_list() -> None:
    ids = {entry.split("@")[0] for entries in EXPECTED.values() for entry in entries}
    names = {i.split(".")[2] for i in ids}
    for rule in (
        "gpu_limit_missing",
        "gpu_request_mismatch",
        "nproc_exceeds_gpus",
        "shm_default",
        "shm_not_memory",
        "shm_exceeds_memory_limit",
        "runtime_class_missing",
        "run_as_root",
        "no_user",
        "root_user",
        "privileged",
        "host_network",
        "host_ipc",
        "ipc_lock",
        "latest_tag",
        "no_log_volume",
        "gpus_missing",
        "master_addr_localhost",
        "torchrun_without_srun",
        "standalone_multinode",
        "pytorchjob_container_name",
        "tasks_per_node",
        "shm_small",
        "nproc_exceeds_gpus",
    ):
        assert rule in names, rule
    assert set(BROKEN.iterdir()) == {BROKEN / n for n in EXPECTED}, "every corpus file has expectations"


def test_rule_catalogue_is_complete() -> None:
    for name, rule in catalogue().items():
        for key in ("severity", "areas", "title", "message", "why", "fix", "source"):
            assert getattr(rule, key), (name, key)
        message = rule.message if isinstance(rule.message, str) else " ".join(rule.message.values())
        assert "expected" in message or rule.severity == "info" or "noted" in message, name
    assert len(rule_ids()) == len(set(rule_ids()))


def test_every_generated_config_lints_clean(tmp_path: Path) -> None:
    files = sorted(p for p in GOLDEN.rglob("*") if p.is_file())
    assert len(files) >= 15
    extra = []
    for target, ext in (
        ("docker", "sh"),
        ("compose", "yaml"),
        ("k8s", "yaml"),
        ("pytorchjob", "yaml"),
        ("jobset", "yaml"),
        ("trainjob", "yaml"),
        ("slurm", "sbatch"),
    ):
        for flags in (["--gpus-per-node", "0"], ["--nodes", "2", "--gpus-per-node", "2", "--script", "t.py"]):
            out = tmp_path / f"{target}-{len(extra)}.{ext}"
            runtime = ["--container-runtime", "pyxis"] if target == "slurm" else []
            assert main(["launch", "--target", target, "--image", "img:1.0", *runtime, *flags, "-o", str(out)]) == 0
            extra.append(out)
    for path in [*files, *extra]:
        found = lint_file(str(path))
        assert found.units, f"{path}: nothing recognised"
        assert found.units[0].trains or found.kind == "dockerfile", path
        bad = [r.summary for r in found.results if r.status in (Status.FAIL, Status.WARN)]
        assert not bad, bad
        assert {r.id.split(".")[2] for r in found.results} <= {"host_network"}, path  # the one noted trade-off


def test_exit_codes_and_formats(tmp_path: Path) -> None:
    proc = run_cli("lint", str(BROKEN / "k8s-job-bare.yaml"))
    assert proc.returncode == 1 and "lint.k8s.shm_default" in proc.stdout and "k8s-job-bare.yaml:12" in proc.stdout
    clean = GOLDEN / "1x8" / "k8s.yaml"
    assert run_cli("lint", str(clean)).returncode == 0
    warn_only = BROKEN / "Dockerfile.root"
    assert run_cli("lint", str(warn_only)).returncode == 0
    assert run_cli("lint", "--strict", str(warn_only)).returncode == 1
    proc = run_cli("lint", "--format", "json", str(BROKEN / "slurm-tasks.sbatch"))
    report = Report.from_dict(json.loads(proc.stdout))
    assert report.command == "lint" and report.verdict().value == "fail"
    r = next(r for r in report.results if r.id == "lint.slurm.tasks_per_node")
    assert (r.evidence[0].source, r.evidence[0].line) == (str(BROKEN / "slurm-tasks.sbatch"), 4)
    assert "#SBATCH --ntasks-per-node=4" in r.evidence[0].text


# The parts of the official SARIF 2.1.0 schema this output relies on: required properties, enums and
# types as in https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json
SARIF_SUBSET = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"enum": ["2.1.0"]},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id"],
                                            "properties": {
                                                "defaultConfiguration": {
                                                    "properties": {
                                                        "level": {"enum": ["none", "note", "warning", "error"]}
                                                    }
                                                }
                                            },
                                        },
                                    }
                                },
                            }
                        },
                    },
                    "invocations": {"type": "array", "items": {"type": "object", "required": ["executionSuccessful"]}},
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "ruleIndex": {"type": "integer", "minimum": -1},
                                "message": {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}]},
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "anyOf": [
                                                    {"required": ["address"]},
                                                    {"required": ["artifactLocation"]},
                                                ],
                                                "properties": {
                                                    "region": {
                                                        "type": "object",
                                                        "properties": {"startLine": {"type": "integer", "minimum": 1}},
                                                    }
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_sarif_output(tmp_path: Path) -> None:
    out = tmp_path / "lint.sarif"
    files = [str(BROKEN / "k8s-statefulset-hostnet.yaml"), str(BROKEN / "docker-compose.yml")]
    proc = run_cli("lint", "--format", "sarif", "--output", str(out), *files)
    assert proc.returncode == 1 and proc.stdout == ""
    sarif = json.loads(out.read_text())
    jsonschema.validate(sarif, SARIF_SUBSET)
    run = sarif["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels["lint.k8s.host_network"] == "note" and levels["lint.k8s.privileged"] == "warning"
    assert levels["lint.k8s.master_addr_localhost"] == "error"
    loc = next(r for r in run["results"] if r["ruleId"] == "lint.k8s.master_addr_localhost")["locations"][0]
    assert loc["physicalLocation"]["region"]["startLine"] == 25
    uri = loc["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.startswith("file:///") and uri.endswith("k8s-statefulset-hostnet.yaml")
    assert run["invocations"][0]["executionSuccessful"] is True


BAD_INPUTS = {
    "malformed.yaml": b"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n   image: x\n",
    "bomb.yaml": b"a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + b"".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n".encode() for i in range(8)),
    "recursive.yaml": b"a: &a [*a]\n",
    "notk8s.yaml": b"name: something\nvalues: [1, 2]\n",
    "tags.yaml": b"apiVersion: v1\nkind: Pod\nmetadata: !!python/object:os.system {}\n",
    "blob.bin": bytes(range(256)) * 4,
    "latin1.sh": "torchrun --nproc_per_node=2 caf\xe9.py\n".encode("latin-1"),
    "notes.txt": b"just some notes about training\n",
}


def test_bad_input_one_message_per_file_exit_2(tmp_path: Path) -> None:
    paths = []
    for name, data in BAD_INPUTS.items():
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as f:  # 100 MB, sparse: refused by size before any read
        f.truncate(100 * 1024 * 1024)
    (tmp_path / "adir").mkdir()
    paths += [huge, tmp_path / "adir", tmp_path / "missing.yaml"]
    before = {p: p.read_bytes() for p in paths if p.is_file() and p != huge}
    good = BROKEN / "k8s-job-bare.yaml"
    proc = run_cli("lint", *map(str, paths), str(good), timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == len(paths), lines
    for p, line in zip(paths, lines):
        assert line.startswith(f"ddp-doctor: error: {p}"), line
    assert "malformed.yaml:6" in lines[0]
    assert "alias" in lines[1] or "nodes" in lines[1]
    assert "over the 10 MiB limit" in lines[len(BAD_INPUTS)]
    assert "lint.k8s.shm_default" in proc.stdout  # the readable file is still linted
    assert all(p.read_bytes() == data for p, data in before.items())


def test_multi_document_and_other_kinds(tmp_path: Path) -> None:
    path = tmp_path / "all.yaml"
    path.write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: c\n        image: img\n        args: [torchrun, --nproc-per-node, '2', t.py]\n"
        "---\n"
        "apiVersion: kubeflow.org/v2beta1\nkind: MPIJob\nmetadata: {name: m}\nspec:\n  mpiReplicaSpecs:\n    Worker:\n"
        "      template:\n        spec:\n          containers:\n          - name: w\n            image: img:1\n"
        "            securityContext: {privileged: true, runAsNonRoot: true}\n"
        "---\n"
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}\n"
        "---\n"
        "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
    )
    report, unreadable = lint([str(path)])
    assert not unreadable
    ids = {(r.id, r.evidence[0].line) for r in report.results}
    assert ("lint.k8s.latest_tag", 9) in ids and ("lint.k8s.gpu_limit_missing", 8) in ids
    assert ("lint.k8s.privileged", 23) in ids
    skipped = [r for r in report.results if r.status is Status.SKIP]
    assert len(skipped) == 1 and "Widget" in skipped[0].summary and skipped[0].evidence[0].line == 25
    text = render(report, "text")
    assert "lint.k8s.gpu_limit_missing" in text


@pytest.mark.timeout(60)
def test_alias_bomb_is_bounded_in_time_and_memory(tmp_path: Path) -> None:
    import time

    path = tmp_path / "laughs.yaml"
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 12)]
    path.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    proc = run_cli("lint", str(path))
    assert proc.returncode == 2 and "alias" in proc.stderr
    assert time.monotonic() - started < 30


def test_docs_list_every_rule() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "lint.md").read_text()
    for name, rule in catalogue().items():
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row is not None, name
        assert rule.severity in row and all(area in row for area in rule.areas), name


def test_shm_beyond_memory_limit_in_docker_and_compose(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(
        "#!/bin/sh\ndocker run --gpus 2 --shm-size 32g \\\n  --memory 16g -v /ckpt:/ckpt img:1.0 "
        "torchrun --nproc_per_node 2 t.py\n"
    )
    found = {(r.id, r.evidence[0].line) for r in lint_file(str(script)).results}
    assert ("lint.docker.shm_exceeds_memory_limit", 2) in found
    compose_file = tmp_path / "compose.yaml"
    compose_file.write_text(
        "services:\n  t:\n    image: img:1.0\n    shm_size: 8gb\n    mem_limit: 4g\n"
        "    volumes: [./l:/l]\n    gpus: 2\n    user: '1000'\n    command: torchrun --nproc-per-node 2 t.py\n"
    )
    found = {(r.id, r.evidence[0].line) for r in lint_file(str(compose_file)).results}
    assert found == {("lint.compose.shm_exceeds_memory_limit", 4)}


def test_big_inputs_stay_bounded(tmp_path: Path) -> None:
    """Not a benchmark: a size-capped file of the worst shapes must finish, not crawl for minutes."""
    import time

    script = tmp_path / "many.sh"
    script.write_text("#!/bin/sh\n" + "torchrun --nproc_per_node=8 train.py --a b\n" * 60000 + "echo " + "x " * 500000)
    started = time.monotonic()
    found = lint_file(str(script))
    assert time.monotonic() - started < 20
    assert len(found.units) == 5000 and "the rest is not checked" in found.notes[0]
    job = (GOLDEN / "4x8" / "k8s.yaml").read_text()
    manifest = tmp_path / "many.yaml"
    manifest.write_text(("---\n" + job) * 300)  # ~0.8 MB, 600 objects
    started = time.monotonic()
    found = lint_file(str(manifest))
    assert time.monotonic() - started < 20
    assert len(found.units) == 300 and not found.results


def test_a_rules_yaml_entry_of_the_wrong_shape_is_refused_with_its_name_and_key() -> None:
    good = {"severity": "error", "areas": ["k8s"], "title": "t", "message": "m", "why": "w", "source": "https://x"}
    rule = LintRule.of("r", {**good, "fix": {"k8s": "a", "slurm": "b"}})
    assert rule.areas == ("k8s",) and rule.fix == {"k8s": "a", "slurm": "b"}
    with pytest.raises(ValueError, match=r"r\.fix is None, not a text"):
        LintRule.of("r", good)
    with pytest.raises(ValueError, match=r"r\.severity is 'fatal'"):
        LintRule.of("r", {**good, "fix": "f", "severity": "fatal"})
