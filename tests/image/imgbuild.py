"""Build image archives and rootfs trees for the tests and the benchmark, with the stdlib's tarfile."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

Entry = tuple[str, str, Any]  # (name, "file"|"dir"|"symlink"|"hardlink"|"fifo"|"chr", data or link target)


def layer(entries: Iterable[Entry]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, kind, value in entries:
            info = tarfile.TarInfo(name)
            info.mode = 0o755
            if kind == "file":
                data = value if isinstance(value, bytes) else str(value).encode()
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
                continue
            info.type = {
                "dir": tarfile.DIRTYPE,
                "symlink": tarfile.SYMTYPE,
                "hardlink": tarfile.LNKTYPE,
                "fifo": tarfile.FIFOTYPE,
                "chr": tarfile.CHRTYPE,
            }[kind]
            if kind in ("symlink", "hardlink"):
                info.linkname = value
            tf.addfile(info)
    return buf.getvalue()


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def compress(data: bytes, how: str) -> bytes:
    if how == "gzip":
        return gzip.compress(data, compresslevel=1)
    if how == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=1).compress(data)
    return data


def config(
    diff_ids: list[str], user: str = "1000", env: list[str] | None = None, arch: str = "amd64"
) -> dict[str, Any]:
    return {
        "architecture": arch,
        "os": "linux",
        "created": "2026-12-01T00:00:00Z",
        "config": {
            "User": user,
            "Env": env or ["PATH=/usr/local/bin:/usr/bin:/bin"],
            "Cmd": ["python3"],
            "WorkingDir": "/work",
            "Labels": {"org.example": "test"},
        },
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }


def _blob(root: Path, data: bytes) -> dict[str, Any]:
    digest = sha(data)
    path = root / "blobs" / "sha256" / digest.split(":")[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"digest": digest, "size": len(data)}


def oci_layout(
    root: Path,
    layers: list[bytes],
    compression: str = "gzip",
    cfg: dict[str, Any] | None = None,
    platforms: Iterable[str] = ("amd64",),
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    manifests = []
    for arch in platforms:
        c = cfg or config([sha(x) for x in layers], arch=arch)
        cdesc = _blob(root, json.dumps({**c, "architecture": arch}).encode())
        ltype = "application/vnd.oci.image.layer.v1.tar" + ("" if compression in ("none", "raw") else "+" + compression)
        ldescs = [
            {"mediaType": ltype, **_blob(root, x if compression == "raw" else compress(x, compression))} for x in layers
        ]
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cdesc},
            "layers": ldescs,
        }
        mdesc = _blob(root, json.dumps(manifest).encode())
        manifests.append(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **mdesc,
                "platform": {"os": "linux", "architecture": arch},
            }
        )
    (root / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": manifests}))
    return root


def tar_dir(src: Path, dest: Path) -> Path:
    with tarfile.open(dest, "w") as tf:
        for p in sorted(src.rglob("*")):
            tf.add(p, arcname=str(p.relative_to(src)), recursive=False)
    return dest


def docker_archive(path: Path, layers: list[bytes], cfg: dict[str, Any] | None = None) -> Path:
    c = json.dumps(cfg or config([sha(x) for x in layers])).encode()
    with tarfile.open(path, "w") as tf:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))

        names = []
        for x in layers:
            name = sha(x).split(":")[1] + ".tar"
            add(name, x)
            names.append(name)
        cname = sha(c).split(":")[1] + ".json"
        add(cname, c)
        add("manifest.json", json.dumps([{"Config": cname, "RepoTags": ["example/t:1"], "Layers": names}]).encode())
    return path


# -- a fake but realistic torch install ------------------------------------------------------------
SP = "usr/local/lib/python3.11/site-packages"


def torch_rootfs(
    root: Path,
    *,
    version: str = "2.5.1+cu124",
    cuda: str | None = "12.4",
    nccl: str | None = "wheel",
    torchrun: bool = True,
    shebang: str = "/usr/local/bin/python3.11",
) -> Path:
    """nccl: "wheel" (nvidia-nccl-cu12), "torch_lib" (bundled libnccl.so.2), None (missing)."""
    files: dict[str, bytes] = {
        "etc/os-release": b'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n',
        "usr/local/bin/python3.11": b"\x7fELF fake interpreter",
        f"{SP}/torch/__init__.py": b"",
        f"{SP}/torch/version.py": (
            f"from typing import Optional\n__all__ = ['__version__']\n__version__ = '{version}'\n"
            f"debug = False\ncuda: Optional[str] = {cuda!r}\ngit_version = 'abc'\nhip: Optional[str] = None\n"
        ).encode(),
        f"{SP}/torch-{version.split('+')[0]}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
            + (
                'Requires-Dist: nvidia-nccl-cu12==2.21.5; platform_system == "Linux"\n'
                if cuda and nccl != "torch_lib"
                else ""
            )
            + "\nPyTorch\n"
        ).encode(),
    }
    if cuda:
        files[f"{SP}/torch/lib/libtorch_cuda.so"] = (
            b"\x7fELF ... libnccl.so.2 ... ncclCommInitRank" if nccl != "torch_lib" else b"\x7fELF"
        )
        files[f"{SP}/nvidia/cudnn/lib/libcudnn.so.9"] = b"\x7fELF"
        files[f"{SP}/nvidia_cudnn_cu12-9.1.0.70.dist-info/METADATA"] = b"Name: nvidia-cudnn-cu12\nVersion: 9.1.0.70\n"
        files[f"{SP}/nvidia/cuda_runtime/lib/libcudart.so.12"] = b"\x7fELF"
        files[f"{SP}/nvidia_cuda_runtime_cu12-12.4.127.dist-info/METADATA"] = (
            b"Name: nvidia-cuda-runtime-cu12\nVersion: 12.4.127\n"
        )
    if nccl == "wheel":
        files[f"{SP}/nvidia/nccl/lib/libnccl.so.2"] = b"\x7fELF"
        files[f"{SP}/nvidia_nccl_cu12-2.21.5.dist-info/METADATA"] = (
            b"Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.21.5\n"
        )
    elif nccl == "torch_lib":
        files[f"{SP}/torch/lib/libnccl.so.2"] = b"\x7fELF"
    if torchrun:
        files["usr/local/bin/torchrun"] = (
            f"#!{shebang}\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n"
        ).encode()
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        os.chmod(p, 0o755)
    for link, target in (("usr/local/bin/python3", "python3.11"), ("usr/local/bin/python", "python3")):
        (root / link).symlink_to(target)
    (root / "tmp").mkdir(exist_ok=True)
    return root
