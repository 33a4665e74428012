"""Audit verdicts on realistic trees: each rule's FAIL/WARN path, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.image import imgbuild
from tests.image.imgbuild import SP


def image(tmp_path: Path, env: list[str] | None = None, user: str = "1000", **kwargs: object) -> Path:
    rootfs = imgbuild.torch_rootfs(tmp_path / "rootfs", **kwargs)  # type: ignore[arg-type]
    return rootfs_image(tmp_path, rootfs, env, user)


def rootfs_image(tmp_path: Path, rootfs: Path, env: list[str] | None = None, user: str = "1000") -> Path:
    data = imgbuild.tar_dir(rootfs, tmp_path / "layer.tar").read_bytes()
    cfg = imgbuild.config([imgbuild.sha(data)], user=user, env=env)
    return imgbuild.oci_layout(tmp_path / "img", [data], compression="zstd", cfg=cfg)


def results(path: Path) -> tuple[int, dict[str, dict]]:  # type: ignore[type-arg]
    proc = run_cli("image", str(path), "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, {r["id"]: r for r in json.loads(proc.stdout)["results"]}


def test_torchrun_shebang_of_a_moved_venv(tmp_path: Path) -> None:
    rc, r = results(image(tmp_path, shebang="/opt/old-venv/bin/python"))
    assert rc == 1 and r["image.torchrun"]["status"] == "fail"
    assert "runs #!/opt/old-venv/bin/python, which does not exist" in r["image.torchrun"]["summary"]


def test_torchrun_not_on_path(tmp_path: Path) -> None:
    rc, r = results(image(tmp_path, env=["PATH=/usr/bin:/bin"]))
    assert rc == 1 and r["image.torchrun"]["status"] == "fail"
    assert "but not on PATH (/usr/bin:/bin); expected /usr/local/bin on PATH" in r["image.torchrun"]["summary"]
    assert 'ENV PATH="/usr/local/bin:$PATH"' in r["image.torchrun"]["remedy"]


def test_env_shebang_resolves_through_path(tmp_path: Path) -> None:
    rc, r = results(image(tmp_path, shebang="/usr/bin/env python3"))
    assert rc == 0 and r["image.torchrun"]["status"] == "pass"


def test_baked_nccl_variables_warn(tmp_path: Path) -> None:
    rc, r = results(image(tmp_path, env=["PATH=/usr/local/bin:/usr/bin", "NCCL_P2P_DISABLE=1", "NCCL_DEBUG=INFO"]))
    assert rc == 0 and r["image.env"]["status"] == "warn"
    assert "NCCL_P2P_DISABLE=1" in r["image.env"]["summary"]
    assert r["image.env"]["observed"]["env"] == {"NCCL_P2P_DISABLE": "1", "NCCL_DEBUG": "INFO"}


def test_static_nccl_inside_libtorch_cuda(tmp_path: Path) -> None:
    rootfs = imgbuild.torch_rootfs(tmp_path / "rootfs", nccl="torch_lib")
    (rootfs / SP / "torch/lib/libnccl.so.2").unlink()
    (rootfs / SP / "torch/lib/libtorch_cuda.so").write_bytes(
        b"\x7fELF" + b"\0" * (3 << 20) + b"NCCL version %s" + b"\0" * 100
    )
    rc, r = results(rootfs_image(tmp_path, rootfs))
    assert rc == 0, r["image.nccl"]
    assert r["image.nccl"]["observed"]["source"] == "static in libtorch_cuda"


def test_unofficial_pair_and_other_nccl(tmp_path: Path) -> None:
    rootfs = imgbuild.torch_rootfs(tmp_path / "rootfs", version="2.5.1+cu122", cuda="12.2")
    dist = rootfs / SP / "nvidia_nccl_cu12-2.21.5.dist-info"
    dist.rename(rootfs / SP / "nvidia_nccl_cu12-2.18.1.dist-info")
    (rootfs / SP / "nvidia_nccl_cu12-2.18.1.dist-info/METADATA").write_text("Name: nvidia-nccl-cu12\nVersion: 2.18.1\n")
    rc, r = results(rootfs_image(tmp_path, rootfs))
    assert rc == 0
    assert (
        r["image.official_build"]["status"] == "warn" and "cu118, cu121, cu124" in r["image.official_build"]["summary"]
    )
    assert r["image.nccl"]["observed"]["version"] == "2.18.1"


def test_nccl_version_differs_from_the_release_table(tmp_path: Path) -> None:
    rootfs = imgbuild.torch_rootfs(tmp_path / "rootfs")
    (rootfs / SP / "nvidia_nccl_cu12-2.21.5.dist-info/METADATA").write_text("Name: nvidia-nccl-cu12\nVersion: 2.20.5\n")
    rc, r = results(rootfs_image(tmp_path, rootfs))
    assert rc == 0 and r["image.nccl"]["status"] == "warn"
    assert (
        "the official torch 2.5+cu124 wheel ships NCCL 2.21.5" in r["image.nccl"]["summary"]
        and "nvidia-nccl-cu12==2.21.5" in r["image.nccl"]["remedy"]
    )


def test_no_python_no_torch(tmp_path: Path) -> None:
    (tmp_path / "rootfs" / "etc").mkdir(parents=True)
    rc, r = results(rootfs_image(tmp_path, tmp_path / "rootfs"))
    assert rc == 1 and r["image.python"]["status"] == "fail" and r["image.torch"]["status"] == "fail"


def test_secret_env_values_stay_out_of_the_report(tmp_path: Path) -> None:
    path = image(
        tmp_path,
        env=["PATH=/usr/local/bin:/usr/bin", "HF_TOKEN=hf_abc123", "AWS_SECRET_ACCESS_KEY=xyz", "NCCL_DEBUG=WARN"],
    )
    proc = run_cli("image", str(path), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "hf_abc123" not in proc.stdout and "xyz" not in proc.stdout
    env = json.loads(proc.stdout)["facts"]["image"]["env"]
    assert env["HF_TOKEN"] == "<redacted>" and env["NCCL_DEBUG"] == "WARN"


def test_every_environment_with_torch_is_listed_and_the_choice_explained(tmp_path: Path) -> None:
    rootfs = imgbuild.torch_rootfs(tmp_path / "rootfs")
    # another user's scratch venv, not on PATH: listed, never judged in place of the image's own torch
    scratch = rootfs / "tmp/someone/venv/lib/python3.11/site-packages/torch"
    scratch.mkdir(parents=True)
    (scratch / "version.py").write_text("__version__ = '2.0.0+cpu'\ncuda = None\n")
    (rootfs / "tmp/someone/venv/bin").mkdir(parents=True)
    (rootfs / "tmp/someone/venv/bin/python3.11").write_text("")
    _, r = results(rootfs_image(tmp_path, rootfs, env=["PATH=/usr/local/bin:/usr/bin:/bin"]))
    py = r["image.python"]
    assert (
        "2 environments with torch: /usr/local (torch 2.5.1+cu124), /tmp/someone/venv (torch 2.0.0+cpu)"
        in py["summary"]
    )
    assert "judged /usr/local because its bin (/usr/local/bin) comes first on the image's PATH" in py["summary"]
    assert [e["prefix"] for e in py["observed"]["torch_environments"]] == ["/usr/local", "/tmp/someone/venv"]
    # nothing on PATH: the system location still wins over the scratch venv, and says why
    (tmp_path / "b").mkdir()
    _, r = results(rootfs_image(tmp_path / "b", rootfs, env=["PATH=/nowhere"]))
    assert "judged /usr/local because none is on PATH; it is in a system location" in r["image.python"]["summary"]
