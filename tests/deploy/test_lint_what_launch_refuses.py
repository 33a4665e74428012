"""What `launch` refuses to write, `lint` finds in a config written by hand, in each format it reads:
uid 0 under runAsNonRoot, ids out of range (a negative uid, past 2^31-1), a namespace that is not a
DNS-1123 label. Through the installed console script."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_cli

FILES = {
    "job.yaml": """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: train, namespace: BAD_NS}
        spec:
          template:
            spec:
              securityContext: {runAsNonRoot: true, runAsUser: 0, runAsGroup: -1}
              containers:
              - {name: t, image: "img:1", command: [torchrun, t.py]}
        """,
    "run.sh": """
        #!/bin/sh
        docker run --gpus all --shm-size 16g -v /ckpt:/ckpt --user -1:1000 img:1 torchrun --nproc-per-node 8 t.py
        """,
    "compose.yaml": """
        services:
          train:
            image: img:1
            user: "1000:2147483648"
            shm_size: 16g
            command: torchrun --nproc-per-node 1 t.py
        """,
    "Dockerfile": """
        FROM img:1
        USER -1
        CMD ["torchrun", "t.py"]
        """,
}
FOUND = {
    "job.yaml": {"lint.k8s.non_root_conflict", "lint.k8s.invalid_id", "lint.k8s.invalid_name"},
    "run.sh": {"lint.docker.invalid_id"},
    "compose.yaml": {"lint.compose.invalid_id"},
    "Dockerfile": {"lint.dockerfile.invalid_id"},
}


@pytest.mark.parametrize("name", list(FILES))
def test_lint_finds_what_launch_refuses(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(textwrap.dedent(FILES[name]).lstrip())
    proc = run_cli("lint", str(path), "--format", "json", console=True)
    assert proc.returncode == 1, proc.stderr
    errors = {r["id"] for r in json.loads(proc.stdout)["results"] if r["status"] == "fail"}
    assert FOUND[name] <= errors, errors


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--uid", "0"], "--uid 0 runs the job as root"),
        (["--uid", "-1"], "--uid -1 is not a Linux id"),
        (["--namespace", "BAD_NS"], "--namespace 'BAD_NS' is not a DNS-1123 label"),
    ],
)
def test_launch_refuses_the_same(flags: list[str], words: str) -> None:
    proc = run_cli("launch", "--target", "k8s", "--image", "img:1", *flags, console=True)
    assert proc.returncode == 2 and words in proc.stderr


def test_names_and_ids_in_range_are_not_judged(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(
        "#!/bin/sh\ndocker run --gpus all --shm-size 16g -v /c:/c --user trainer:2147483647 img:1 torchrun t.py\n"
    )
    proc = run_cli("lint", str(script), "--format", "json", console=True)
    assert not [r for r in json.loads(proc.stdout)["results"] if r["id"].endswith("invalid_id")]
