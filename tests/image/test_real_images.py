"""`ddp-doctor image` on images made by podman and skopeo, in every format they write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.root
FORMATS = ("docker-archive", "oci-archive", "oci-layout", "rootfs-tar", "rootfs")


def audit(path: Path) -> tuple[int, dict[str, dict]]:  # type: ignore[type-arg]
    proc = run_cli("image", str(path), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    return proc.returncode, report | {"by_id": {r["id"]: r for r in report["results"]}}


@pytest.mark.parametrize("fmt", FORMATS)
def test_good_image_passes_in_every_format(real_images: dict[str, dict[str, Path]], fmt: str) -> None:
    rc, report = audit(real_images["good"][fmt])
    r = report["by_id"]
    assert r["image.torch"]["status"] == "pass" and "2.5.1+cu124" in r["image.torch"]["summary"]
    assert r["image.nccl"]["status"] == "pass", r["image.nccl"]
    assert r["image.nccl"]["observed"]["version"] == "2.21.5"
    assert r["image.nccl"]["observed"]["source"] == "nvidia-nccl-cu12"
    assert r["image.torchrun"]["status"] == "pass", r["image.torchrun"]
    assert r["image.cudnn"]["observed"]["version"] == "9.1.0.70"
    assert r["image.cuda_runtime"]["observed"]["version"] == "12.4.127"
    assert r["image.official_build"]["status"] == "pass"
    facts = report["facts"]
    assert facts["torch"]["cuda"] == "12.4" and facts["torch"]["flavour"] == "cuda"
    assert facts["python"]["executable"] == "/usr/local/bin/python3.11"
    assert facts["image"]["os_release"] == "Debian GNU/Linux 12 (bookworm)"
    if fmt.startswith(("docker", "oci")):
        assert rc == 0, report["results"]
        assert r["image.integrity"]["status"] == "pass"
        assert r["image.user"]["status"] == "pass"
        assert facts["image"]["config"]["Cmd"] == ["python3"]
        assert facts["image"]["layer_count"] == 1
    else:
        assert r["image.integrity"]["status"] == "skip" and r["image.user"]["status"] == "skip"


def test_zstd_layers(real_images: dict[str, dict[str, Path]]) -> None:
    rc, report = audit(real_images["good"]["oci-zstd"])
    assert rc == 0
    assert report["facts"]["image"]["layers"][0]["compression"] == "zstd"


@pytest.mark.parametrize("fmt", ("docker-archive", "oci-archive", "oci-layout"))
def test_broken_variants(real_images: dict[str, dict[str, Path]], fmt: str) -> None:
    rc, report = audit(real_images["no_nccl"][fmt])
    assert rc == 1
    nccl = report["by_id"]["image.nccl"]
    assert nccl["status"] == "fail" and "cannot run DDP on GPUs" in nccl["summary"]
    assert "nvidia-nccl-cu12==2.21.5" in nccl["cause"] and "pip install" in nccl["remedy"]

    rc, report = audit(real_images["no_torchrun"][fmt])
    assert rc == 1 and report["by_id"]["image.torchrun"]["status"] == "fail"
    assert "torch.distributed.run" in report["by_id"]["image.torchrun"]["remedy"]

    rc, report = audit(real_images["root"][fmt])
    assert rc == 0 and report["verdict"] == "warn"
    assert report["by_id"]["image.user"]["status"] == "warn"

    rc, report = audit(real_images["cpu"][fmt])
    assert rc == 1 and report["by_id"]["image.torch"]["status"] == "fail"
    assert "CPU-only" in report["by_id"]["image.torch"]["summary"]
    assert "download.pytorch.org/whl/cu" in report["by_id"]["image.torch"]["remedy"]

    rc, report = audit(real_images["bundled"][fmt])
    assert rc == 0 and report["by_id"]["image.nccl"]["observed"]["source"] == "torch/lib"


def test_text_report_names_the_run_command(real_images: dict[str, dict[str, Path]]) -> None:
    proc = run_cli("image", str(real_images["good"]["docker-archive"]))
    assert proc.returncode == 0, proc.stderr
    assert "image.nccl" in proc.stdout and "verdict: PASS" in " ".join(proc.stdout.split())
    proc = run_cli("image", str(real_images["good"]["docker-archive"]), "--format", "json")
    remedy = {r["id"]: r for r in json.loads(proc.stdout)["results"]}["image.run_command"]["remedy"]
    assert "docker run --rm --gpus all --shm-size=32g" in remedy and "localhost/ddp-doctor-test/good:1" in remedy
    assert "medium: Memory" in remedy and "nvidia.com/gpu" in remedy


@pytest.mark.parametrize("fmt", ("docker-archive", "oci-archive"))
def test_whiteouts_written_by_podman_build(slimmed_image: dict[str, Path], fmt: str) -> None:
    rc, report = audit(slimmed_image[fmt])
    image = report["facts"]["image"]
    assert image["layer_count"] == 2 and image["whiteouts"] >= 2
    assert rc == 1 and report["by_id"]["image.nccl"]["status"] == "fail"
    assert "cannot run DDP on GPUs" in report["by_id"]["image.nccl"]["summary"]
    assert report["by_id"]["image.torchrun"]["status"] == "pass"  # the rest of the lower layer is still there
