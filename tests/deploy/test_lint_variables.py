"""lint reads variables wherever a config sets them (container env, compose environment, Dockerfile
ENV, `export` in a script, `srun --export`, `mpirun -x`, SkyPilot envs) and judges each with the one
table `check` and `image` use; a CPU job gets no NCCL findings; a value filled in later is judged by
its name only."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddp_doctor.deploy.lint.engine import lint_file


def _found(tmp_path: Path, name: str, text: str) -> dict[str, list[tuple[int, str]]]:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    out: dict[str, list[tuple[int, str]]] = {}
    for r in lint_file(str(path)).results:
        out.setdefault(r.id.split(".")[-1], []).append((r.evidence[0].line or 0, str(r.observed["severity"])))
    return out


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        (
            "job.yaml",
            """
            apiVersion: v1
            kind: Pod
            metadata: {name: p}
            spec:
              containers:
              - name: t
                image: img:1
                command: [torchrun, --nproc-per-node=1, t.py]
                resources: {limits: {nvidia.com/gpu: 1}}
                env: [{name: NCCL_ALGO, value: bogus}]
            """,
            10,
        ),
        (
            "compose.yaml",
            """
            services:
              t:
                image: img:1
                gpus: all
                environment: {NCCL_ALGO: bogus}
                command: torchrun --nproc-per-node 1 t.py
            """,
            5,
        ),
        ("Dockerfile", "FROM nvcr.io/nvidia/pytorch:24.05-py3\nENV NCCL_ALGO=bogus\nUSER 1000\n", 2),
        (
            "a.sbatch",
            "#!/bin/bash\n#SBATCH --gpus-per-node=1\nexport NCCL_ALGO=bogus\nsrun torchrun --nproc-per-node 1 t.py\n",
            3,
        ),
        (
            "b.sbatch",
            "#!/bin/bash\n#SBATCH --gpus-per-node=1\nsrun --export=ALL,NCCL_ALGO=bogus torchrun --nproc-per-node 1 t.py\n",
            3,
        ),
        (
            "mpi.sbatch",
            "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=1\nmpirun -np 2 -x NCCL_ALGO=bogus python t.py\n",
            4,
        ),
        (
            "task.yaml",
            """
            resources: {accelerators: A100:1}
            envs: {NCCL_ALGO: bogus}
            run: torchrun --nproc-per-node 1 t.py
            """,
            2,
        ),
    ],
)
def test_an_invalid_value_is_found_wherever_it_is_set(tmp_path: Path, name: str, text: str, line: int) -> None:
    found = _found(tmp_path, name, text)
    assert (line, "error") in found.get("variable_invalid", []), found


def test_no_nccl_findings_for_a_cpu_job_and_templated_values_judged_by_name(tmp_path: Path) -> None:
    found = _found(
        tmp_path,
        "cpu.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          containers:
          - name: t
            image: img:1-cpu
            command: [torchrun, --nproc-per-node=2, --backend=gloo, t.py]
            env:
            - {name: NCCL_ALGO, value: bogus}
            - {name: NCCL_TIMEOUT, value: "1800"}
            - {name: TORCH_DISTRIBUTED_DEBUG, value: verbose}
        """,
    )
    assert "variable_not_read" not in found and [line for line, _ in found["variable_invalid"]] == [12]
    templated = _found(
        tmp_path,
        "t.yaml",
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          containers:
          - name: t
            image: img:1
            command: [torchrun, --nproc-per-node=1, --backend=nccl, t.py]
            env:
            - {name: NCCL_IB_TIMEOUT, value: "$(IB_TIMEOUT)"}
            - {name: NCCL_TIMEOUT, value: "{{ .Values.timeout }}"}
        """,
    )
    assert "variable_invalid" not in templated and templated["variable_not_read"] == [(11, "warning")]


def test_typo_only_when_the_value_fits_and_ranks_left_to_the_launcher(tmp_path: Path) -> None:
    found = _found(
        tmp_path,
        "run.sh",
        """
        #!/bin/bash
        export NCCL_IB_TIMEOUTS=1800
        export NCCL_P2P_DISABLED=1
        export RANK=0 WORLD_SIZE=2
        torchrun --nproc-per-node 2 train.py
        """,
    )
    assert found["variable_unknown"] == [(2, "warning"), (3, "warning")]
    assert "variable_invalid" not in found  # RANK / WORLD_SIZE: torchrun sets its own
    plain = _found(tmp_path, "plain.sh", "#!/bin/bash\nexport MASTER_PORT=http\npython train.py\n")
    assert plain["variable_invalid"] == [(2, "warning")]


def test_a_yaml_boolean_is_judged_as_the_runtime_spells_it(tmp_path: Path) -> None:
    """compose passes `NCCL_P2P_DISABLE: true` to the container as `true` (YAML's spelling), which
    NCCL's integer parameter does not read; the finding quotes `true`, never Python's `True`."""
    path = tmp_path / "compose.yaml"
    path.write_text(
        textwrap.dedent(
            """
            services:
              t:
                image: img:1
                gpus: all
                environment: {NCCL_P2P_DISABLE: true}
                command: torchrun --nproc-per-node 1 t.py
            """
        ).lstrip("\n")
    )
    found = [r for r in lint_file(str(path)).results if r.id.endswith("variable_invalid")]
    assert found, "a boolean where NCCL reads an integer is an invalid value"
    text = " ".join(f"{r.summary} {r.cause}" for r in found)
    assert "true" in text and "True" not in text, text
