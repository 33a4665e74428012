"""Layer merge semantics: whiteouts, opaque dirs, links, multi-platform indexes, compression."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_doctor.errors import InputError
from ddp_doctor.image.archive import load
from tests.image.imgbuild import docker_archive, layer, oci_layout


def names(path: Path, platform: str = "linux/amd64") -> set[str]:
    return {p for p, _ in load(str(path), platform).tree.walk()}


@pytest.mark.parametrize("compression", ["none", "gzip", "zstd"])
def test_whiteouts_and_opaque_dirs(tmp_path: Path, compression: str) -> None:
    lower = layer(
        [
            ("a/keep", "file", b"1"),
            ("a/gone", "file", b"2"),
            ("b/old", "file", b"3"),
            ("b/sub/deep", "file", b"4"),
            ("c/x", "file", b"5"),
        ]
    )
    upper = layer(
        [
            ("a/.wh.gone", "file", b""),
            ("b/.wh..wh..opq", "file", b""),
            ("b/new", "file", b"6"),
            ("b/sub/fresh", "file", b"7"),
            ("c/.wh.nothing", "file", b""),
            (".wh.c", "file", b""),
        ]
    )
    path = oci_layout(tmp_path / "img", [lower, upper], compression=compression)
    got = names(path)
    assert {"/a/keep", "/b/new", "/b/sub/fresh"} <= got
    assert not {"/a/gone", "/b/old", "/b/sub/deep", "/c", "/c/x"} & got
    assert not any(".wh." in p for p in got)


def test_whiteout_does_not_hide_its_own_layer(tmp_path: Path) -> None:
    only = layer([("d/f", "file", b"x"), ("d/.wh..wh..opq", "file", b""), ("d/.wh.f", "file", b"")])
    assert "/d/f" in names(oci_layout(tmp_path / "img", [only]))


def test_upper_layer_replaces_and_links_resolve_inside(tmp_path: Path) -> None:
    l1 = layer([("usr/lib/libx.so", "file", b"old"), ("lib", "symlink", "usr/lib")])
    l2 = layer(
        [("usr/lib/libx.so", "file", b"new"), ("lib/liby.so", "file", b"y"), ("h", "hardlink", "usr/lib/libx.so")]
    )
    tree = load(str(docker_archive(tmp_path / "d.tar", [l1, l2]))).tree
    assert tree.lookup("/lib/libx.so")[0] == "/usr/lib/libx.so"  # type: ignore[index]
    assert tree.lookup("/usr/lib/liby.so") is not None
    assert tree.lookup("/h")[1].size == 3  # type: ignore[index]


def test_multi_platform_index(tmp_path: Path) -> None:
    path = oci_layout(tmp_path / "img", [layer([("f", "file", b"x")])], platforms=("amd64", "arm64"))
    assert load(str(path), "linux/arm64").config["architecture"] == "arm64"  # type: ignore[index]
    assert load(str(path)).config["architecture"] == "amd64"  # type: ignore[index]
    with pytest.raises(InputError, match="no image for platform linux/s390x; the index has linux/amd64, linux/arm64"):
        load(str(path), "linux/s390x")
    with pytest.raises(InputError, match="expected OS/ARCH"):
        load(str(path), "amd64")


def test_entry_limit(tmp_path: Path) -> None:
    from ddp_doctor.image.limits import Limits

    path = oci_layout(tmp_path / "img", [layer([(f"f{i}", "file", b"") for i in range(50)])])
    with pytest.raises(InputError, match="more than 20 entries"):
        load(str(path), limits=Limits(max_entries=20))


def test_diff_ids_are_checked_when_asked_or_when_they_are_the_only_digest(tmp_path: Path) -> None:
    import gzip

    from ddp_doctor.image.limits import Limits
    from tests.image.imgbuild import config, sha

    data = layer([("f", "file", b"x")])
    wrong = config(["sha256:" + "0" * 64])
    path = oci_layout(tmp_path / "img", [data], compression="gzip", cfg=wrong)
    load(str(path))  # the blob digest is verified; the diff_id is not needed for integrity
    with pytest.raises(InputError, match=r"\(uncompressed\) has digest .* expected sha256:0000"):
        load(str(path), limits=Limits(verify_diff_ids=True))
    # docker-save layers are named by their diff_id and carry no other digest: always checked
    archive = docker_archive(tmp_path / "d.tar", [gzip.compress(data)], cfg=config([sha(data)]))
    assert load(str(archive)).info["layers"][0]["compression"] == "gzip"
    bad = docker_archive(tmp_path / "bad.tar", [gzip.compress(data)], cfg=wrong)
    with pytest.raises(InputError, match="expected sha256:0000"):
        load(str(bad))


def test_docker_save_layer_symlinks(tmp_path: Path) -> None:
    """`docker save` links identical layers: `ID/layer.tar -> ../HEX.tar`; a link out of the archive is refused."""
    import io
    import json
    import tarfile

    from tests.image.imgbuild import config, sha

    data = layer([("etc/hello", "file", b"hi")])
    hexname = sha(data).split(":")[1]
    cfg = json.dumps(config([sha(data)])).encode()

    def archive(path: Path, link: str) -> Path:
        with tarfile.open(path, "w") as tf:
            for name, blob in (
                (f"{hexname}.tar", data),
                (f"{sha(cfg)[7:]}.json", cfg),
                (
                    "manifest.json",
                    json.dumps([{"Config": f"{sha(cfg)[7:]}.json", "Layers": [f"{'a' * 64}/layer.tar"]}]).encode(),
                ),
            ):
                info = tarfile.TarInfo(name)
                info.size = len(blob)
                tf.addfile(info, io.BytesIO(blob))
            info = tarfile.TarInfo(f"{'a' * 64}/layer.tar")
            info.type, info.linkname = tarfile.SYMTYPE, link
            tf.addfile(info)
        return path

    assert load(str(archive(tmp_path / "ok.tar", f"../{hexname}.tar"))).tree.lookup("/etc/hello") is not None
    with pytest.raises(InputError, match="points outside the archive"):
        load(str(archive(tmp_path / "bad.tar", f"../../{hexname}.tar")))


def test_gzip_with_and_without_isal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip
    import zlib

    from ddp_doctor.image import streams

    data = layer([("f", "file", b"x" * 100_000), ("g", "file", b"y")])
    two_members = gzip.compress(data[:4096]) + gzip.compress(data[4096:])  # pigz-style concatenation
    from tests.image.imgbuild import config, sha

    path = oci_layout(tmp_path / "img", [two_members], compression="raw", cfg=config([sha(data)]))
    broken = oci_layout(tmp_path / "bad", [two_members[:-20]], compression="raw", cfg=config([sha(data)]))
    for module in {streams._ZLIB, zlib}:
        monkeypatch.setattr(streams, "_ZLIB", module)
        assert {"/f", "/g"} <= names(path)
        with pytest.raises(InputError, match="truncated|not valid gzip"):
            load(str(broken))
