"""Malicious archives: each is refused with one clear line (exit 2) or read safely; nothing is written anywhere."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
import uuid
import zlib
from pathlib import Path

import pytest

from ddp_doctor.errors import InputError
from ddp_doctor.image.archive import load
from ddp_doctor.image.limits import Limits
from tests.conftest import run_cli
from tests.image import imgbuild
from tests.image.imgbuild import layer, oci_layout, sha


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, Path]:
    """A private cwd, HOME and TMPDIR for the CLI; each must stay empty."""
    dirs = {name: tmp_path / name for name in ("cwd", "home", "tmp", "in")}
    for d in dirs.values():
        d.mkdir()
    return dirs


def run_image(sandbox: dict[str, Path], path: Path, *extra: str) -> tuple[int, str, str]:
    env = {"HOME": str(sandbox["home"]), "TMPDIR": str(sandbox["tmp"])}
    proc = run_cli("image", str(path), "--format", "json", *extra, env=env, cwd=str(sandbox["cwd"]))
    for name in ("cwd", "home", "tmp"):
        assert list(sandbox[name].iterdir()) == [], f"{name} was written to"
    assert "Traceback" not in proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def refused(sandbox: dict[str, Path], path: Path, *needles: str, extra: tuple[str, ...] = ()) -> str:
    rc, out, err = run_image(sandbox, path, *extra)
    assert rc == 2, (rc, out[:400], err)
    assert out == "" and len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


def escape_target() -> Path:
    return Path("/tmp") / f"ddp-doctor-escape-{uuid.uuid4().hex}"


def image_of(sandbox: dict[str, Path], *layers: bytes) -> Path:
    return oci_layout(sandbox["in"] / "img", list(layers))


def test_dotdot_member(sandbox: dict[str, Path]) -> None:
    target = escape_target()
    path = image_of(sandbox, layer([(f"../../../../../../..{target}", "file", b"pwned")]))
    refused(sandbox, path, "contains '..'")
    assert not target.exists()


def test_absolute_member(sandbox: dict[str, Path]) -> None:
    target = escape_target()
    path = image_of(sandbox, layer([(str(target), "file", b"pwned")]))
    refused(sandbox, path, "absolute path")
    assert not target.exists()


def test_write_through_symlink_out_of_root(sandbox: dict[str, Path]) -> None:
    target = escape_target()
    target.mkdir()
    try:
        path = image_of(sandbox, layer([("evil", "symlink", str(target)), ("evil/pwned", "file", b"x")]))
        refused(sandbox, path, "leads to no directory inside the image")
        assert list(target.iterdir()) == []
    finally:
        target.rmdir()


def test_symlink_dotdot_stays_in_root(sandbox: dict[str, Path]) -> None:
    # `..` past the image root stays at the root (chroot semantics): the file lands at /pwned in the tree.
    path = image_of(
        sandbox, layer([("a", "dir", None), ("a/up", "symlink", "../../../../.."), ("a/up/pwned", "file", b"x")])
    )
    rc, _, _ = run_image(sandbox, path)
    assert rc in (0, 1)
    image = load(str(path))
    found = image.tree.lookup("/a/up/pwned")
    assert found is not None and found[0] == "/pwned"


def test_hardlink_escapes(sandbox: dict[str, Path]) -> None:
    refused(sandbox, image_of(sandbox, layer([("h", "hardlink", "../../../etc/passwd")])), "contains '..'")
    path = oci_layout(sandbox["in"] / "img2", [layer([("h", "hardlink", "/etc/passwd")])])
    refused(sandbox, path, "absolute path")
    path = oci_layout(sandbox["in"] / "img3", [layer([("h", "hardlink", "etc/passwd")])])
    refused(sandbox, path, "not a file an earlier entry created")


def test_hardlink_to_symlink(sandbox: dict[str, Path]) -> None:
    path = image_of(
        sandbox,
        layer([("s", "symlink", "/etc/shadow"), ("h", "hardlink", "s"), ("usr/local/bin/torchrun", "hardlink", "s")]),
    )
    rc, _, _ = run_image(sandbox, path)
    assert rc in (0, 1)
    tree = load(str(path)).tree
    node = tree.lookup("/h", follow=False)
    assert node is not None and node[1].kind == "symlink" and node[1].data is None
    assert tree.lookup("/h") is None  # /etc/shadow of the image, which does not exist; never the host's


def test_devices_and_fifos_are_metadata(sandbox: dict[str, Path]) -> None:
    path = image_of(sandbox, layer([("dev", "dir", None), ("dev/null2", "chr", None), ("fifo", "fifo", None)]))
    rc, out, _ = run_image(sandbox, path)
    assert rc in (0, 1)
    assert json.loads(out)["facts"]["image"]["special_files"] == ["/dev/null2", "/fifo"]


@pytest.mark.parametrize("name", [".wh..", ".wh...", "d/.wh.", "d/.wh..."])
def test_whiteout_naming_dot_or_dotdot(sandbox: dict[str, Path], name: str) -> None:
    path = image_of(sandbox, layer([("d/f", "file", b"x")]), layer([(name, "file", b"")]))
    refused(sandbox, path, "whiteout")


def _bomb(size: int) -> bytes:
    """A gzip layer holding one file of `size` zero bytes, compressed ~1000:1."""
    info = tarfile.TarInfo("zeros")
    info.size = size
    header = info.tobuf(format=tarfile.PAX_FORMAT)
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [c.compress(header)]
    chunk = bytes(1 << 20)
    for _ in range(size >> 20):
        parts.append(c.compress(chunk))
    parts.append(c.compress(bytes(1024)))
    parts.append(c.flush())
    return b"".join(parts)


def test_decompression_bomb(sandbox: dict[str, Path]) -> None:
    blob = _bomb(96 << 20)
    assert len(blob) < 200_000
    cfg = imgbuild.config([sha(gzip.decompress(blob))])
    path = oci_layout(sandbox["in"] / "img", [blob], compression="raw", cfg=cfg)
    refused(sandbox, path, "decompression bomb", extra=("--max-bytes", "32M"))
    with pytest.raises(InputError, match="looks like a decompression bomb"):
        load(str(path), limits=Limits(ratio_grace_bytes=1 << 20, max_ratio=100))
    rc, _, _ = run_image(sandbox, path)  # under the default limits it is just a big file
    assert rc in (0, 1)


def test_declared_size_larger_than_data(sandbox: dict[str, Path]) -> None:
    whole = layer([("big", "file", b"x" * 4096)])
    cut = whole[: 512 * 3 + 100]  # pax header + header + 100 bytes of a 4096-byte file
    path = oci_layout(sandbox["in"] / "img", [cut], compression="raw", cfg=imgbuild.config([sha(cut)]))
    refused(sandbox, path, "truncated")
    refused(sandbox, path, "over the limit of 1024 (--max-entry-bytes)", extra=("--max-entry-bytes", "1k"))


def test_descriptor_size_larger_than_blob(sandbox: dict[str, Path]) -> None:
    path = image_of(sandbox, layer([("f", "file", b"x")]))
    manifest_path = _manifest_path(path)
    manifest = json.loads(manifest_path.read_bytes())
    manifest["layers"][0]["size"] += 1000
    _replace_manifest(path, manifest)
    refused(sandbox, path, "truncated")


def test_digest_mismatch(sandbox: dict[str, Path]) -> None:
    path = oci_layout(sandbox["in"] / "img", [layer([("f", "file", b"hello")])], compression="none")
    blob = next(p for p in (path / "blobs" / "sha256").iterdir() if b"hello" in p.read_bytes())
    raw = bytearray(blob.read_bytes())
    raw[raw.index(b"hello")] = ord("j")  # same size, valid tar: only the digest can tell
    blob.write_bytes(bytes(raw))
    refused(sandbox, path, "expected sha256:", "corrupt or was modified")


def test_truncated_gzip_layer(sandbox: dict[str, Path]) -> None:
    blob = gzip.compress(layer([("f", "file", os.urandom(50_000))]))[:-3000]
    path = oci_layout(sandbox["in"] / "img", [blob], compression="raw", cfg=imgbuild.config([sha(blob)]))
    refused(sandbox, path, "truncated")


def test_manifest_digest_pointing_outside(sandbox: dict[str, Path]) -> None:
    path = image_of(sandbox, layer([("f", "file", b"x")]))
    index = json.loads((path / "index.json").read_text())
    index["manifests"][0]["digest"] = "sha256:../../../../etc/passwd"
    (path / "index.json").write_text(json.dumps(index))
    refused(sandbox, path, "is not 'sha256:<64 hex>'")


def test_docker_manifest_pointing_outside(sandbox: dict[str, Path]) -> None:
    tar_path = sandbox["in"] / "d.tar"
    with tarfile.open(tar_path, "w") as tf:
        for name, data in (("manifest.json", json.dumps([{"Config": "../../etc/passwd", "Layers": []}]).encode()),):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    refused(sandbox, tar_path, "points outside the archive")


def test_blob_symlinked_out_of_layout(sandbox: dict[str, Path], tmp_path: Path) -> None:
    path = image_of(sandbox, layer([("f", "file", b"x")]))
    outside = tmp_path / "secret"
    outside.write_bytes(b"secret")
    victim = max((path / "blobs" / "sha256").iterdir(), key=lambda p: p.stat().st_size)
    victim.unlink()
    victim.symlink_to(outside)
    refused(sandbox, path, "symbolic link")


def test_garbage_inputs(sandbox: dict[str, Path]) -> None:
    junk = sandbox["in"] / "junk.bin"
    junk.write_bytes(os.urandom(4096))
    refused(sandbox, junk, "junk.bin")
    refused(sandbox, sandbox["in"] / "missing.tar", "cannot read")
    gz = sandbox["in"] / "junk.tar.gz"
    gz.write_bytes(b"\x1f\x8b" + os.urandom(2000))
    refused(sandbox, gz, "gzip")


def _manifest_path(layout: Path) -> Path:
    digest = json.loads((layout / "index.json").read_text())["manifests"][0]["digest"]
    return layout / "blobs" / "sha256" / digest.split(":")[1]


def _replace_manifest(layout: Path, manifest: dict) -> None:  # type: ignore[type-arg]
    data = json.dumps(manifest).encode()
    (layout / "blobs" / "sha256" / sha(data).split(":")[1]).write_bytes(data)
    index = json.loads((layout / "index.json").read_text())
    index["manifests"][0].update(digest=sha(data), size=len(data))
    (layout / "index.json").write_text(json.dumps(index))
