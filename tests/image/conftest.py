"""Real images made by real tools: fake torch rootfs trees, `podman import`, `podman save`, `skopeo copy`.

Podman runs with a private storage root in a temp dir and runc (crun refuses this machine's cgroups).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.image import imgbuild

# lock_type "file": podman's default shm lock (/dev/shm/libpod_lock) would outlive the tests
CONTAINERS_CONF = '[engine]\nruntime = "runc"\nlock_type = "file"\n[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n'
VARIANTS = {
    "good": ({"nccl": "wheel"}, "1000"),
    "bundled": ({"nccl": "torch_lib"}, "1000"),
    "no_nccl": ({"nccl": None}, "1000"),
    "no_torchrun": ({"torchrun": False}, "1000"),
    "root": ({}, None),
    "cpu": ({"version": "2.5.1+cpu", "cuda": None, "nccl": None}, "1000"),
}


class Podman:
    def __init__(self, base: Path) -> None:
        self.base = base
        conf = base / "containers.conf"
        conf.write_text(CONTAINERS_CONF)
        storage = base / "storage.conf"  # for ddp-doctor's own engine calls, which take no --root flags
        storage.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{base}/root"\nrunroot = "{base}/runroot"\n')
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf), "CONTAINERS_STORAGE_CONF": str(storage)}
        self.argv = [
            "podman",
            "--root",
            str(base / "root"),
            "--runroot",
            str(base / "runroot"),
            "--runtime",
            shutil.which("runc") or "/usr/sbin/runc",
        ]

    def __call__(self, *args: str, timeout: float = 120) -> str:
        proc = subprocess.run(
            [*self.argv, *args], check=False, capture_output=True, text=True, env=self.env, timeout=timeout
        )
        if proc.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def close(self) -> None:
        subprocess.run([*self.argv, "rm", "-a", "-f"], check=False, capture_output=True, env=self.env, timeout=60)
        subprocess.run(
            [*self.argv, "system", "reset", "-f"], check=False, capture_output=True, env=self.env, timeout=60
        )


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    if shutil.which("podman") is None or os.geteuid() != 0:
        pytest.skip("needs podman and root")
    p = Podman(tmp_path_factory.mktemp("podman"))
    yield p
    p.close()


@pytest.fixture(scope="session")
def real_images(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Path]]:
    """variant -> {"docker-archive": file, "oci-archive": file, "oci-layout": dir, "oci-zstd": dir}."""
    out: dict[str, dict[str, Path]] = {}
    base = tmp_path_factory.mktemp("images")
    for name, (kwargs, user) in VARIANTS.items():
        rootfs = imgbuild.torch_rootfs(base / f"{name}-rootfs", **kwargs)  # type: ignore[arg-type]
        tarball = imgbuild.tar_dir(rootfs, base / f"{name}.tar")
        changes = ["--change", "ENV=PATH=/usr/local/bin:/usr/bin:/bin", "--change", 'CMD=["python3"]']
        if user:
            changes += ["--change", f"USER={user}"]
        ref = f"localhost/ddp-doctor-test/{name.replace('_', '-')}:1"
        podman("import", *changes, str(tarball), ref)
        files = {
            "rootfs": rootfs,
            "rootfs-tar": tarball,
            "docker-archive": base / f"{name}.docker.tar",
            "oci-archive": base / f"{name}.oci.tar",
        }
        podman("save", "--format", "docker-archive", "-o", str(files["docker-archive"]), ref)
        podman("save", "--format", "oci-archive", "-o", str(files["oci-archive"]), ref)
        files["oci-layout"] = base / f"{name}.layout"
        subprocess.run(
            ["skopeo", "copy", "-q", f"oci-archive:{files['oci-archive']}", f"oci:{files['oci-layout']}:1"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        if name == "good":
            files["oci-zstd"] = base / f"{name}.zstd"
            subprocess.run(
                [
                    "skopeo",
                    "copy",
                    "-q",
                    "--dest-compress-format",
                    "zstd",
                    "--dest-compress",
                    f"oci-archive:{files['oci-archive']}",
                    f"oci:{files['oci-zstd']}:1",
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )
        out[name] = files
    return out


@pytest.fixture(scope="session")
def slimmed_image(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A good image 'slimmed' by `podman build` with `RUN rm -rf .../nvidia/nccl`: real whiteouts in layer 2."""
    base = tmp_path_factory.mktemp("slim")
    rootfs = imgbuild.torch_rootfs(base / "rootfs")
    for src, rel in (("/bin/dash", "bin/sh"), ("/bin/rm", "bin/rm")):  # just enough to RUN rm
        (rootfs / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, rootfs / rel)
    for lib in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"):
        (rootfs / lib[1:]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, rootfs / lib[1:])
    tarball = imgbuild.tar_dir(rootfs, base / "base.tar")
    podman(
        "import",
        "--change",
        "ENV=PATH=/usr/local/bin:/bin",
        "--change",
        "USER=1000",
        str(tarball),
        "localhost/ddp-doctor-test/base:1",
    )
    sp = f"/{imgbuild.SP}"
    (base / "Containerfile").write_text(
        f"FROM localhost/ddp-doctor-test/base:1\nUSER 0:0\n"
        f"RUN rm -rf {sp}/nvidia/nccl {sp}/nvidia_nccl_cu12-2.21.5.dist-info\nUSER 1000\n"
    )
    podman("build", "-q", "-t", "localhost/ddp-doctor-test/slim:1", str(base))
    out = {"docker-archive": base / "slim.docker.tar", "oci-archive": base / "slim.oci.tar"}
    podman("save", "--format", "docker-archive", "-o", str(out["docker-archive"]), "localhost/ddp-doctor-test/slim:1")
    podman("save", "--format", "oci-archive", "-o", str(out["oci-archive"]), "localhost/ddp-doctor-test/slim:1")
    return out
