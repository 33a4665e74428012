"""Fields Kubernetes types as strings, written as YAML numbers or booleans: the API server refuses the
object (EnvVar.value is a string, Container.command and args are []string:
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddp_doctor.deploy.lint.engine import lint_file

JOB = """
apiVersion: batch/v1
kind: Job
metadata: {{name: t}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: t
        image: img:1.0
        command: [torchrun, --nproc-per-node=1, t.py]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
{extra}
"""


def _hits(tmp_path: Path, extra: str, kind_doc: str = JOB) -> list[tuple[int, str]]:
    path = tmp_path / "job.yaml"
    path.write_text(textwrap.dedent(kind_doc.format(extra=textwrap.indent(extra, " " * 8))).lstrip("\n"))
    return [
        (r.evidence[0].line or 0, r.summary)
        for r in lint_file(str(path)).results
        if r.id == "lint.k8s.value_not_string"
    ]


@pytest.mark.parametrize(
    ("written", "type_word", "shown"),
    [("1", "integer", "1"), ("2.5", "number", "2.5"), ("true", "boolean", "true"), ("yes", "boolean", "true")],
)
def test_an_env_value_that_yaml_reads_as_no_string_is_an_error(
    tmp_path: Path, written: str, type_word: str, shown: str
) -> None:
    ((line, summary),) = _hits(tmp_path, f"env:\n- name: NNODES\n  value: {written}\n")
    assert line == 15
    assert f"gives env NNODES the YAML {type_word} {shown}; expected a string" in summary


def test_numbers_in_args_are_refused_too_and_the_finding_names_the_item(tmp_path: Path) -> None:
    found = _hits(tmp_path, "args: [--epochs, 10, --lr, '0.1']\n")
    assert len(found) == 1 and "args[1] the YAML integer 10" in found[0][1]


@pytest.mark.parametrize(
    "extra",
    [
        "env:\n- name: NNODES\n  value: '2'\n- name: FLAG\n  value: \"true\"\n",
        "env:\n- name: EMPTY\n  value:\n- name: FROM\n  valueFrom: {fieldRef: {fieldPath: metadata.name}}\n",
        "args: ['--epochs', '10']\n",
    ],
)
def test_quoted_values_null_and_value_from_are_accepted(tmp_path: Path, extra: str) -> None:
    assert _hits(tmp_path, extra) == []


def test_the_same_in_a_pod_template_of_any_kind(tmp_path: Path) -> None:
    """A JobSet nests the pod template two levels down; the rule follows every pod template."""
    jobset = """
    apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata: {{name: js}}
    spec:
      replicatedJobs:
      - name: workers
        replicas: 2
        template:
          spec:
            template:
              spec:
                containers:
                - name: t
                  image: img:1.0
                  command: [torchrun, --nnodes=2, --nproc-per-node=1, t.py]
                  env:
                  - {{name: NPROC_PER_NODE, value: 1}}
    """
    found = _hits(tmp_path, "", textwrap.dedent(jobset))
    assert [line for line, _ in found] == [17]
