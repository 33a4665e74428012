"""The YAML and shell parsers never crash or hang on arbitrary input: they return or raise InputError."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.deploy.lint.loader import load_yaml_documents
from ddp_doctor.deploy.lint.shellparse import commands
from ddp_doctor.errors import InputError

FAST = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
YAML_BITS = st.sampled_from(
    [
        "apiVersion: v1\n",
        "kind: Pod\n",
        "kind: Job\n",
        "spec:\n",
        "  containers:\n",
        "  - name: x\n",
        "    image: a:latest\n",
        "&a ",
        "*a",
        "<<: *a\n",
        "[",
        "]",
        "{",
        "}",
        "- ",
        ": ",
        "---\n",
        "'",
        '"',
        "|\n",
        "  ",
        "\t",
        "!!str ",
        "!tag ",
        "? ",
        "#",
        "\n",
        "services:\n",
        "  s:\n",
        "    command: torchrun --nnodes=2\n",
        "\x00",
        "\ufeff",
        "%YAML 1.1\n",
    ]
)
SHELL_BITS = st.sampled_from(
    [
        "docker run ",
        "podman run ",
        "torchrun ",
        "--gpus ",
        "all ",
        "--nproc_per_node=",
        "8 ",
        "--nnodes=2 ",
        "--master_addr=localhost ",
        "-v ",
        "/a:/b ",
        "'",
        '"',
        "\\\n",
        "\n",
        "; ",
        "&& ",
        "| ",
        "$(",
        ")",
        "${X}",
        "#",
        "export A=1 ",
        "bash -c ",
        "srun ",
        "#SBATCH --nodes=2\n",
        "-it ",
        "--",
        "=",
        " ",
    ]
)


@FAST
@given(st.lists(YAML_BITS, max_size=40).map("".join) | st.text(max_size=300))
def test_yaml_loader_returns_or_raises_input_error(text: str) -> None:
    try:
        load_yaml_documents(text, "fuzz.yaml")
    except InputError as exc:
        assert str(exc).startswith("fuzz.yaml")


@FAST
@given(st.lists(SHELL_BITS, max_size=40).map("".join) | st.text(max_size=300))
def test_shell_parser_never_raises(text: str) -> None:
    lines = text.count("\n") + 1
    for cmd in commands(text):
        for word in cmd.words:
            assert 1 <= word.line <= lines


@FAST
@given(
    data=st.binary(max_size=400) | st.lists(YAML_BITS | SHELL_BITS, max_size=30).map(lambda b: "".join(b).encode()),
    name=st.sampled_from(["k.yaml", "docker-compose.yml", "Dockerfile", "run.sh", "job.sbatch", "notes"]),
)
def test_lint_file_returns_or_raises_input_error(tmp_path: Path, data: bytes, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    try:
        lint_file(str(path))
    except InputError:
        pass


@pytest.mark.parametrize("depth", [50, 5000])
def test_deep_nesting_is_refused_not_a_crash(depth: int) -> None:
    try:
        load_yaml_documents("[" * depth + "]" * depth, "deep.yaml")
    except InputError as exc:
        assert "deep" in str(exc)
