"""The user's files are never lost: an --output that is one of the command's inputs (by name, through a
symlink, or a hard link to it) or a file inside an input directory is refused with exit 2 before any
work, and the input is left byte for byte as it was. One case per command."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_cli

LOG = b"[rank1]: torch.distributed.DistBackendError: NCCL error\r\nsecond line\r\n"
MANIFEST = b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b:1}]}\n"
REPORT = json.dumps({"schema_version": 1, "command": "check", "results": []}).encode()
SPEC = b"image: nvcr.io/nvidia/pytorch:24.05-py3\nnodes: 1\n"
NCCL_TESTS = b"#  out-of-place in-place\n#       size    count   type   redop    root     time   algbw   busbw\n"


def _same(tmp: Path, name: str) -> str:
    return str(tmp / name)


def _symlink(tmp: Path, name: str) -> str:
    (tmp / "link").symlink_to(tmp / name)
    return str(tmp / "link")


def _hardlink(tmp: Path, name: str) -> str:
    os.link(tmp / name, tmp / "hard")
    return str(tmp / "hard")


WAYS: dict[str, Callable[[Path, str], str]] = {"same name": _same, "symlink": _symlink, "hard link": _hardlink}

# command argv ({input} is the input's path), the input's name and bytes
CASES = [
    (["explain", "{input}"], "crlf.log", LOG),
    (["lint", "{input}"], "mine.yaml", MANIFEST),
    (["lint", "other.yaml", "--config", "{input}"], "lint.toml", b"[lint]\nignore = []\n"),
    (["render", "{input}", "--format", "html"], "rep.json", REPORT),
    (["launch", "--target", "k8s", "--spec", "{input}"], "spec.yaml", SPEC),
    (["image", "{input}"], "image.tar", b"not really a tar"),
    (["bench", "--baseline", "{input}"], "base.json", REPORT),
    (["bench", "--import", "{input}"], "nccl-tests.log", NCCL_TESTS),
    (["run", "--run-dir", "evidence", "--", "python3", "{input}"], "train.py", b"print('hi')\n"),
    (["check", "--static", "--python", "{input}"], "python3", b'#!/bin/sh\nexec /usr/bin/python3 "$@"\n'),
]


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize(("argv", "name", "data"), CASES, ids=[f"{c[0][0]}:{c[1]}" for c in CASES])
def test_output_that_is_an_input_is_refused(tmp_path: Path, argv: list[str], name: str, data: bytes, way: str) -> None:
    given = tmp_path / name
    given.write_bytes(data)
    given.chmod(0o755)
    (tmp_path / "other.yaml").write_bytes(MANIFEST)
    output = WAYS[way](tmp_path, name)
    command, *rest = (a.replace("{input}", str(given)) for a in argv)
    proc = run_cli(
        command, "--output", output, *rest, console=True, cwd=tmp_path, env={"TMPDIR": str(tmp_path)}, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"ddp-doctor: error: --output {output} would overwrite the input {given}: write the report somewhere else"
    ]
    assert given.read_bytes() == data
    assert not (tmp_path / "evidence").exists()  # `run` did not start the job


def test_output_inside_an_input_directory_is_refused(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    proc = run_cli("image", str(rootfs), "-o", str(rootfs / "etc" / "report.json"), console=True)
    assert proc.returncode == 2
    expected = (
        f"ddp-doctor: error: --output {rootfs}/etc/report.json would write inside the input directory {rootfs}: "
        "write the report somewhere else"
    )
    assert proc.stderr.strip().splitlines() == [expected]
    assert not (rootfs / "etc" / "report.json").exists()


def test_the_system_root_as_input_still_takes_a_report_path(tmp_path: Path) -> None:
    # `ddp-doctor image /` audits the running system: every path is inside `/`, so the directory rule cannot apply
    # there (a GPU recording found `image / -o /tmp/x.json` refused); a real rootfs directory still refuses.
    from ddp_doctor import output

    output.refuse_before_work(str(tmp_path / "host_root.json"), ["/"])
    rootfs = tmp_path / "rootfs"
    rootfs.mkdir()
    with pytest.raises(output.UsageError, match="inside the input directory"):
        output.refuse_before_work(str(rootfs / "report.json"), [str(rootfs)])


def test_plot_onto_the_baseline_is_refused(tmp_path: Path) -> None:
    (tmp_path / "base.png").write_bytes(b"\x89PNG not a report")
    proc = run_cli(
        "bench", "--baseline", str(tmp_path / "base.png"), "--plot", str(tmp_path / "base.png"), console=True
    )
    assert proc.returncode == 2 and "--plot" in proc.stderr and "would overwrite the input" in proc.stderr


def test_a_different_file_and_devices_are_still_written(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(LOG)
    done = run_cli("explain", str(log), "-o", str(tmp_path / "report.txt"), console=True)
    assert done.returncode == 1 and "NCCL" in (tmp_path / "report.txt").read_text()
    assert run_cli("explain", str(log), "-o", "/dev/null", console=True).returncode == 1
