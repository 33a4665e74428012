"""One rootfs and one config, three commands: `check --static` (facts from that rootfs's torch, imported
through PYTHONPATH; /dev/shm and the user from a real mount namespace), `image` (the same rootfs read as
an image) and `lint` (a compose file that says the same about /dev/shm, the user and the variables). Where they judge
the same fact they must give the same verdict in the same words: they call the same check units."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.checks import table
from ddp_doctor.checks.variables import VariableVerdict
from ddp_doctor.commands.lint import lint
from ddp_doctor.env import checks as env_checks
from ddp_doctor.image.audit import audit
from ddp_doctor.report import Result, Status
from tests.conftest import run_cli
from tests.env.factsbuilder import make_facts
from tests.image import imgbuild

FAKE_TORCH_INIT = """\
from torch import version as version
from torch import distributed as distributed
__version__ = version.__version__
"""
FAKE_DIST = """\
def is_available(): return True
def is_nccl_available(): return True
def is_gloo_available(): return True
def is_mpi_available(): return False
"""


def _rootfs(root: Path, version: str, cuda: str) -> Path:
    """A fake torch that really imports, so `check --static` probes it like any torch."""
    imgbuild.torch_rootfs(root, version=version, cuda=cuda)
    torch = root / imgbuild.SP / "torch"
    (torch / "__init__.py").write_text(FAKE_TORCH_INIT)
    (torch / "distributed").mkdir()
    (torch / "distributed" / "__init__.py").write_text(FAKE_DIST)
    (torch / "distributed" / "run.py").write_text("def main(): return 0\n")
    return root


def _results(proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert proc.returncode in (0, 1), proc.stderr
    assert "Traceback" not in proc.stderr
    return {r["id"]: r for r in json.loads(proc.stdout)["results"]}


@pytest.mark.parametrize(("version", "cuda"), [("2.5.1+cu124", "12.4"), ("2.5.1+cu122", "12.2")])
def test_check_static_and_image_agree_on_the_torch_of_one_rootfs(tmp_path: Path, version: str, cuda: str) -> None:
    root = _rootfs(tmp_path / "rootfs", version, cuda)
    image = _results(run_cli("image", str(root), "--format", "json"))
    host = _results(
        run_cli("check", "--static", "--format", "json", env={"PYTHONPATH": str(root / imgbuild.SP)}, timeout=180)
    )
    assert host["env.torch.import"]["status"] == "pass", host["env.torch.import"]  # the rootfs's torch was probed
    pairs = {"env.torch.build": "image.torch", "env.official_build": "image.official_build"}
    for env_id, image_id in pairs.items():
        h, i = host[env_id], image[image_id]
        # the same files, seen from outside (under the rootfs) and from inside (the image's own paths)
        assert (h["status"], h["summary"].replace(str(root), "")) == (i["status"], i["summary"]), (h, i)
        assert h["cause"] == i["cause"]
    if version.endswith("cu122"):  # never shipped: both call it a custom build, with the same words
        assert image["image.official_build"]["status"] == "warn"
        assert "custom build: torch 2.5 was never shipped for cu122" in image["image.official_build"]["summary"]


COMPOSE = """\
services:
  train:
    image: example/train:1
    shm_size: 64m
    user: root
    command: ["torchrun", "--nproc-per-node=2", "train.py"]
    deploy:
      resources:
        reservations:
          devices: [{driver: nvidia, count: 2, capabilities: [gpu]}]
"""


@pytest.mark.root
def test_check_image_and_lint_agree_on_shm_and_user(tmp_path: Path) -> None:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private 64 MiB /dev/shm")
    # check: this process, as root, in a mount namespace whose /dev/shm is a 64 MiB tmpfs
    script = f"mount -t tmpfs -o size=64m tmpfs /dev/shm && {sys.executable} -m ddp_doctor check --static --format json"
    proc = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    host = _results(proc)
    # image: the same rootfs as a docker archive whose config runs as root
    root = imgbuild.torch_rootfs(tmp_path / "rootfs")
    layer = imgbuild.tar_dir(root, tmp_path / "layer.tar").read_bytes()
    archive = imgbuild.docker_archive(tmp_path / "img.tar", [layer], imgbuild.config([imgbuild.sha(layer)], user=""))
    image = _results(run_cli("image", str(archive), "--format", "json"))
    # lint: a config that sizes /dev/shm at 64 MiB and runs as root
    compose = tmp_path / "compose.yaml"
    compose.write_text(COMPOSE)
    lint = _results(run_cli("lint", str(compose), "--format", "json"))

    shm_host, shm_lint = host["env.shm"], lint["lint.compose.shm_small"]
    assert shm_host["status"] == shm_lint["status"] == "fail"  # under 256 MiB: a failure in both
    rule = table.shm()
    assert "expected >= 1.0 GiB" in shm_host["summary"] and "expected at least 1.0 GiB" in shm_lint["summary"]
    # the same advice: 4 GiB per GPU; lint knows the 2 GPUs of the config, check here sees none (a full node)
    assert f"--shm-size={rule.docker_size(None)}" in shm_host["remedy"]
    assert f"--shm-size={rule.docker_size(2)}" in shm_lint["remedy"] and "4 GiB per GPU" in shm_lint["remedy"]

    users = [host["env.user"], image["image.user"], lint["lint.compose.run_as_root"]]
    assert {u["status"] for u in users} == {"warn"}
    assert {u["cause"] for u in users} == {rule_why := table.non_root().why}, rule_why
    for u in users:
        assert "runs as root (" in u["summary"] and u["summary"].endswith("expected a non-root user"), u


VARIABLES = {"NCCL_TIMEOUT": "1800", "NCCL_IB_TIMEOUT": "40", "NCCL_SOCKET_NTHREADS": "99"}
"""A setting no library reads and two values NCCL ignores (its range is 1..31 and 1..16)."""


def _verdict_texts(result: Result) -> dict[str, str]:
    return {v.variable: v.text for v in map(VariableVerdict.from_dict, result.observed["verdicts"])}


def test_check_image_and_lint_give_one_variable_the_same_verdict(tmp_path: Path) -> None:
    """The three subjects reach the same unit through the one registry: a GPU host (check), an image
    whose config Env sets them, a compose file of a GPU job whose environment sets them."""
    host = {r.id: r for r in env_checks.evaluate(make_facts(env=VARIABLES))}["env.dist_vars"]
    layer = imgbuild.tar_dir(imgbuild.torch_rootfs(tmp_path / "rootfs"), tmp_path / "layer.tar").read_bytes()
    cfg = imgbuild.config([imgbuild.sha(layer)], env=[f"{k}={v}" for k, v in VARIABLES.items()])
    archive = imgbuild.docker_archive(tmp_path / "img.tar", [layer], cfg)
    image = {r.id: r for r in audit(str(archive)).results}["image.env"]
    compose = tmp_path / "compose.yaml"
    compose.write_text(COMPOSE + "    environment:\n" + "".join(f"      {k}: '{v}'\n" for k, v in VARIABLES.items()))
    linted = [r for r in lint([str(compose)])[0].results if r.id.startswith("lint.compose.variable_")]

    texts = _verdict_texts(host)
    assert sorted(texts) == sorted(VARIABLES), texts
    assert (
        texts["NCCL_IB_TIMEOUT"]
        == "NCCL_IB_TIMEOUT=40: '40' is not accepted; NCCL_IB_TIMEOUT takes an integer >= 1 and <= 31"
    )
    assert texts["NCCL_TIMEOUT"].startswith("NCCL_TIMEOUT=1800: no library reads NCCL_TIMEOUT")
    assert _verdict_texts(image) == texts
    assert {str(r.observed["text"]) for r in linted} == set(texts.values())
    assert sorted(r.id for r in linted) == [
        "lint.compose.variable_invalid",
        "lint.compose.variable_invalid",
        "lint.compose.variable_not_read",
    ]
    for text in texts.values():  # and each summary says it in those words
        assert text in host.summary and text in image.summary
        assert any(text in r.summary for r in linted)
    assert host.status is image.status is Status.WARN
    assert {r.status for r in linted} == {Status.WARN}
