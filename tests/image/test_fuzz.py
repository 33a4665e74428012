"""Fuzzing the parsers: tar stream and pax headers, layer merge with whiteouts and links, index /
manifest / config JSON, torch/version.py, METADATA and shebangs. 10,400 generated cases in all;
the only exception allowed out of the readers is InputError (exit 2), and the small parsers raise none."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddp_doctor.errors import InputError
from ddp_doctor.image import findings
from ddp_doctor.image.archive import Layers, Peek_bytes, Policy, load_oci
from ddp_doctor.image.limits import Limits
from ddp_doctor.image.streams import Hashing
from ddp_doctor.image.tarstream import _parse_pax
from tests.image.imgbuild import layer

pytestmark = pytest.mark.slow  # about 20-50 s for all 10,400 cases on 2 busy cores
LIMITS = Limits(max_total_bytes=8 << 20, max_entry_bytes=1 << 20, max_entries=5000, ratio_grace_bytes=1 << 20)
POLICY = Policy(
    keep=lambda p: 64 if p.endswith(("version.py", "torchrun")) else 0,
    scan=lambda p: (b"libnccl",) if p.endswith(".so") else (),
)
FAST = settings(deadline=None, suppress_health_check=list(HealthCheck), database=None)
SEED = layer(
    [
        ("usr/local/lib/python3.11/site-packages/torch/version.py", "file", b"__version__ = '2.5.1'\ncuda = '12.4'\n"),
        ("usr/local/bin/torchrun", "file", b"#!/usr/local/bin/python3.11\n"),
        ("lib", "symlink", "usr/lib"),
        ("usr/lib/libnccl.so.2", "file", b"x" * 700),
        ("h", "hardlink", "usr/lib/libnccl.so.2"),
        ("d/.wh..wh..opq", "file", b""),
        ("a" * 150 + "/" + "b" * 120, "file", b"long"),
    ]
)


def apply(*blobs: bytes) -> Layers:
    layers = Layers(LIMITS, POLICY)
    for blob in blobs:
        try:
            h = Hashing(Peek_bytes(blob), None, "fuzz")
            layers.apply(h, "fuzz", h, None)
        except InputError:
            pass
    return layers


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(SEED)
    for _ in range(draw(st.integers(0, 8))):
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    cut = draw(st.integers(0, len(data)))
    return bytes(data[:cut]) if draw(st.booleans()) else bytes(data)


@settings(FAST, max_examples=2700)
@given(st.one_of(mutated(), st.binary(max_size=2048)))
def test_tar_stream(blob: bytes) -> None:
    apply(blob)


PART = st.sampled_from(
    ["a", "b", "..", ".", "", ".wh.a", ".wh.b", ".wh..wh..opq", ".wh..wh.plnk", ".wh..", "bin", "torchrun"]
)
NAME = st.lists(PART, min_size=1, max_size=4).map("/".join) | st.just("/etc/passwd")
ENTRY = st.tuples(NAME, st.sampled_from(["file", "dir", "symlink", "hardlink", "fifo", "chr"]), NAME)


def _entry(e: tuple[str, str, str]) -> tuple[str, str, Any]:
    name, kind, target = e
    return (name, kind, b"data" if kind == "file" else target)


@settings(FAST, max_examples=2500)
@given(st.lists(st.lists(ENTRY, max_size=8), min_size=1, max_size=3))
def test_layer_merge_and_whiteouts(layers_spec: list[list[tuple[str, str, str]]]) -> None:
    blobs = [layer([_entry(e) for e in spec]) for spec in layers_spec]
    tree = apply(*blobs).tree
    for path, _node in tree.walk():
        parts = path.split("/")[1:]
        assert ".." not in parts and "." not in parts and "" not in parts, path
        assert not parts[-1].startswith(".wh."), path
    tree.lookup("/a/b/../bin/torchrun")


JSONV = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**40) | st.text(max_size=12),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)


class MemStore:
    path = "mem"

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def put(self, data: bytes) -> dict[str, Any]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        self.files["blobs/sha256/" + digest[7:]] = data
        return {"digest": digest, "size": len(data)}

    def has(self, name: str) -> bool:
        return name in self.files

    def read(self, name: str, limit: int) -> bytes:
        if name not in self.files:
            raise InputError(f"{name} missing")
        return self.files[name][:limit]

    def blob(self, name: str) -> tuple[Any, int, Any]:
        if name not in self.files:
            raise InputError(f"{name} missing")
        return Peek_bytes(self.files[name]), len(self.files[name]), lambda: None


@settings(FAST, max_examples=2500)
@given(JSONV, JSONV, JSONV, st.sampled_from(["index", "manifest", "config", "valid"]), st.booleans())
def test_manifests_and_configs(junk1: Any, junk2: Any, junk3: Any, where: str, raw: bool) -> None:
    store = MemStore()
    lay = layer([("f", "file", b"x")])
    ldesc = store.put(lay)
    config: Any = {
        "architecture": "amd64",
        "os": "linux",
        "rootfs": {"diff_ids": [ldesc["digest"]]},
        "config": {"User": junk1 if where != "valid" or isinstance(junk1, str) else "1000"},
    }
    if where == "config":
        config = junk2 if raw else {**config, "rootfs": junk2}
    cdesc = store.put(json.dumps(config).encode())
    manifest: Any = {"schemaVersion": 2, "config": cdesc, "layers": [ldesc]}
    if where == "manifest":
        manifest = (
            junk2 if raw else {**manifest, "layers": junk2, "config": junk3 if isinstance(junk3, dict) else cdesc}
        )
    mdesc = store.put(json.dumps(manifest).encode())
    index: Any = {"manifests": [{**mdesc, "platform": {"os": "linux", "architecture": "amd64"}}]}
    if where == "index":
        index = junk2 if raw else {"manifests": [junk2, {**mdesc, "platform": junk3}]}
    store.files["index.json"] = json.dumps(index).encode()
    try:
        image = load_oci(store, "fuzz", "linux/amd64", LIMITS, POLICY)  # type: ignore[arg-type]
    except InputError:
        assert where != "valid"
        return
    from ddp_doctor.image.audit import facts_of
    from ddp_doctor.image.subject import evaluate

    evaluate(facts_of(image, "mem"))


@settings(FAST, max_examples=2700)
@given(
    st.binary(max_size=300)
    | st.text(alphabet="_version cuda=:'\"Optional[str]\n#!/ bin\x00 NameVersion-Requires", max_size=200).map(
        str.encode
    )
)
def test_small_parsers(data: bytes) -> None:
    out = findings.parse_version_py(data)
    assert all(v is None or isinstance(v, str) for v in out.values())
    assert isinstance(findings.parse_metadata(data)["requires"], list)
    words = findings.shebang(data)
    assert words is None or all(isinstance(w, str) for w in words)
    try:
        assert isinstance(_parse_pax(data, "fuzz"), dict)
    except InputError:
        pass
