"""How fast, and in how much memory, does `ddp-doctor image` audit a large image?

Generates an image of --size-gb (files of mixed sizes over several layers, plus a fake torch
install), audits it with the real CLI in a child process (wall time, peak RSS from wait4), and
runs two yardsticks over the same archive bytes in this script: sha256 of the archive (what any
digest verification must at least cost) and plain read() of every byte (the I/O ceiling).

    .venv/bin/python benchmarks/bench_image_audit.py                      # 2 GB docker-archive
    .venv/bin/python benchmarks/bench_image_audit.py --size-gb 10         # the issue's 10 GB target
    .venv/bin/python benchmarks/bench_image_audit.py --compression gzip   # OCI layout, gzip layers
    .venv/bin/python benchmarks/bench_image_audit.py --compression zstd

Targets (issue 6): < 200 MB peak RSS and >= 200 MB/s of archive read. The page cache is warm for
every measurement alike (the archive was just written); nothing is dropped.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.image import imgbuild

MiB = 1 << 20
# (file size, share of the image bytes): many small files, some medium, a few large, like a CUDA image.
MIX = ((4 << 10, 0.10), (256 << 10, 0.30), (64 << 20, 0.60))


def write_layer(path: Path, layer_bytes: int, seed: int, block: bytes) -> int:
    rng = random.Random(seed)
    entries = 0
    with open(path, "wb") as f, tarfile.open(fileobj=f, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for size, share in MIX:
            budget = int(layer_bytes * share)
            i = 0
            while budget > 0:
                n = min(size, budget)
                info = tarfile.TarInfo(f"opt/data{seed}/s{size}/d{i // 1000}/f{i}")
                info.size = n
                off = rng.randrange(0, len(block) - n) if n < len(block) else 0
                data = block[off : off + n] if n <= len(block) else (block * (n // len(block) + 1))[:n]
                tf.addfile(info, io.BytesIO(data))
                budget -= n
                i += 1
                entries += 1
    return entries


def torch_layer(path: Path, workdir: Path) -> None:
    rootfs = imgbuild.torch_rootfs(workdir / "torch-rootfs")
    imgbuild.tar_dir(rootfs, path)
    shutil.rmtree(rootfs)


def build(workdir: Path, size_gb: float, layers: int, compression: str) -> tuple[Path, int]:
    block = os.urandom(8 * MiB)  # incompressible data, repeated beyond gzip's and zstd-1's windows
    per_layer = int(size_gb * 1e9 / layers)
    layer_files = []
    entries = 0
    for i in range(layers):
        p = workdir / f"layer{i}.tar"
        entries += write_layer(p, per_layer, i, block)
        layer_files.append(p)
    p = workdir / "torch.tar"
    torch_layer(p, workdir)
    layer_files.append(p)
    diff_ids = [_sha_file(p) for p in layer_files]
    cfg = json.dumps(imgbuild.config(diff_ids)).encode()
    if compression == "none":
        archive = workdir / "image.docker.tar"
        with tarfile.open(archive, "w") as tf:
            names = []
            for p, d in zip(layer_files, diff_ids):
                name = d.split(":")[1] + ".tar"
                tf.add(p, arcname=name)
                names.append(name)
                p.unlink()
            _add(tf, hashlib.sha256(cfg).hexdigest() + ".json", cfg)
            _add(
                tf,
                "manifest.json",
                json.dumps(
                    [
                        {
                            "Config": hashlib.sha256(cfg).hexdigest() + ".json",
                            "RepoTags": ["bench/big:1"],
                            "Layers": names,
                        }
                    ]
                ).encode(),
            )
        return archive, entries
    layout = workdir / f"image.{compression}.layout"
    blobs = layout / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    (layout / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    descs = []
    for p in layer_files:
        tmp = workdir / "blob.tmp"
        _compress(p, tmp, compression)
        d = _sha_file(tmp)
        size = tmp.stat().st_size
        tmp.rename(blobs / d.split(":")[1])
        p.unlink()
        descs.append({"mediaType": f"application/vnd.oci.image.layer.v1.tar+{compression}", "digest": d, "size": size})
    cdesc = _put(blobs, cfg)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **cdesc},
            "layers": descs,
        }
    ).encode()
    mdesc = _put(blobs, manifest)
    (layout / "index.json").write_text(
        json.dumps(
            {
                "schemaVersion": 2,
                "manifests": [
                    {
                        "mediaType": "application/vnd.oci.image.manifest.v1+json",
                        **mdesc,
                        "platform": {"os": "linux", "architecture": "amd64"},
                    }
                ],
            }
        )
    )
    return layout, entries


def _add(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def _put(blobs: Path, data: bytes) -> dict[str, object]:
    d = hashlib.sha256(data).hexdigest()
    (blobs / d).write_bytes(data)
    return {"digest": "sha256:" + d, "size": len(data)}


def _compress(src: Path, dest: Path, how: str) -> None:
    with open(src, "rb") as fin, open(dest, "wb") as fout:
        if how == "gzip":
            with gzip.GzipFile(fileobj=fout, mode="wb", compresslevel=1, mtime=0) as gz:
                shutil.copyfileobj(fin, gz, 4 * MiB)
        else:
            import zstandard

            zstandard.ZstdCompressor(level=1, threads=-1).copy_stream(fin, fout)


def _sha_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(4 * MiB):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def archive_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def timed_child(argv: list[str], workdir: Path) -> tuple[float, float, int, bytes]:
    """Wall time and peak RSS of argv. GNU time reports the RSS of the exec'ed program alone; a
    forked Python child would also count the pages it shared with this (large) process."""
    rss_file = workdir / "rss.txt"
    wrapper = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file)] if Path("/usr/bin/time").exists() else []
    start = time.monotonic()
    p = subprocess.run(wrapper + argv, check=False, capture_output=True)
    wall = time.monotonic() - start
    rss_mb = int(rss_file.read_text().split()[-1]) / 1024 if wrapper else float("nan")
    return wall, rss_mb, p.returncode, p.stdout + p.stderr


def yardstick_read(path: Path) -> float:
    files = [p for p in sorted(path.rglob("*")) if p.is_file()] if path.is_dir() else [path]
    start = time.monotonic()
    for p in files:
        with open(p, "rb") as f:
            while f.read(4 * MiB):
                pass
    return time.monotonic() - start


def yardstick_sha256(path: Path) -> float:
    files = [p for p in sorted(path.rglob("*")) if p.is_file()] if path.is_dir() else [path]
    start = time.monotonic()
    for p in files:
        _sha_file(p)
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gb", type=float, default=2.0)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--compression", choices=["none", "gzip", "zstd"], default="none")
    ap.add_argument("--workdir", help="where to write the image (default: a temp dir, removed afterwards)")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    workdir = Path(a.workdir or tempfile.mkdtemp(prefix="bench-image-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.monotonic()
        image, entries = build(workdir, a.size_gb, a.layers, a.compression)
        size = archive_bytes(image)
        print(
            f"generated {size / 1e9:.2f} GB ({a.compression}, {a.layers + 1} layers, {entries} files) in {time.monotonic() - t0:.0f} s"
        )
        doctor = [sys.executable, "-m", "ddp_doctor", "image", str(image), "--format", "json"]
        wall, rss_mb, rc, output = timed_child(doctor, workdir)
        report = json.loads(output)
        by_id = {r["id"]: r for r in report["results"]}
        assert rc == 0, by_id
        assert by_id["image.nccl"]["status"] == "pass" and by_id["image.integrity"]["status"] == "pass"
        sha_s = yardstick_sha256(image)
        read_s = yardstick_read(image)
        mbps = size / 1e6 / wall
        print(
            f"ddp-doctor image : {wall:6.2f} s  {mbps:7.0f} MB/s  peak RSS {rss_mb:6.1f} MB  (targets: >= 200 MB/s, < 200 MB)"
        )
        print(
            f"sha256 yardstick : {sha_s:6.2f} s  {size / 1e6 / sha_s:7.0f} MB/s  -> doctor/sha256 speed ratio {sha_s / wall:.2f}"
        )
        print(
            f"read() yardstick : {read_s:6.2f} s  {size / 1e6 / read_s:7.0f} MB/s  -> doctor/read speed ratio {read_s / wall:.2f}"
        )
        ok = mbps >= 200 and rss_mb < 200
        print("verdict: " + ("meets both targets" if ok else "MISSES a target"))
        return 0 if ok else 1
    finally:
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
