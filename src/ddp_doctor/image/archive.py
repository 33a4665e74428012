"""Open an image in any of its on-disk forms and merge its layers into a Tree, verifying every blob.

Forms: a `docker save` tarball, an OCI image layout directory, an OCI archive, a `docker export`
or other rootfs tarball (plain, gzip or zstd), and a rootfs directory.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO, TypedDict, cast

from ddp_doctor.errors import InputError
from ddp_doctor.image.limits import Limits
from ddp_doctor.image.rootfs_dir import walk_into
from ddp_doctor.image.streams import (
    CHUNK,
    BombGuard,
    Hashing,
    Peek,
    Readable,
    ReadAhead,
    Slice,
    check_digest,
    compression_of,
    decompressed,
    scan_markers,
)
from ddp_doctor.image.tarstream import TarStream
from ddp_doctor.image.tree import Tree
from ddp_doctor.words import plural

INDEX_TYPES = {"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}
_ARCHIVE_NAME = re.compile(
    r"^(oci-layout|index\.json|manifest\.json|repositories|blobs(/[a-z0-9]+(/[a-f0-9]+)?)?/?"
    r"|[a-f0-9]{64}\.(json|tar)|[a-f0-9]{64}(/(VERSION|json|layer\.tar))?/?)$"
)
_HEX_NAME = re.compile(r"(?:^|/)(?:blobs/sha256/)?([a-f0-9]{64})(?:\.tar|\.json)?$")


# The JSON an image holds, as the OCI image spec (image-spec v1.1 descriptor.md, config.md) and docker save
# (moby image/tarexport) spell it: only the fields read here, each one's type checked before the cast.
class Descriptor(TypedDict, total=False):
    mediaType: str
    digest: str
    size: int
    platform: object
    """Checked where it is read (_matches): a platform is optional and compared field by field."""
    annotations: dict[str, str]


class ContainerConfig(TypedDict, total=False):
    User: str
    Env: list[str]
    Entrypoint: list[str] | str
    Cmd: list[str] | str
    WorkingDir: str
    Labels: dict[str, str]
    ExposedPorts: dict[str, object]


class RootFs(TypedDict, total=False):
    type: str
    diff_ids: list[str]


class ImageConfig(TypedDict, total=False):
    architecture: str
    os: str
    variant: str
    created: str
    config: ContainerConfig
    rootfs: RootFs


class LayerInfo(TypedDict, total=False):
    compression: str
    entries: int
    diff_id: str
    digest: str
    size_bytes: int


class ArchiveInfo(TypedDict, total=False):
    """What the reader learnt about the archive; facts["image"] starts from it."""

    format: str
    platform: str
    manifest_digest: str
    config_digest: str | None
    ref: str | None
    repo_tags: list[str]
    images_in_archive: int
    compressed_bytes: int
    verified_blobs: int
    note: str
    layers: list[LayerInfo]
    layer_count: int
    uncompressed_bytes: int
    entries: int
    whiteouts: int
    special_files: list[str]


@dataclass
class Image:
    tree: Tree
    config: ImageConfig | None
    """The image config blob (architecture, os, config {User, Env, ...}, rootfs, history); None for a rootfs."""
    info: ArchiveInfo = field(default_factory=ArchiveInfo)
    markers: dict[str, set[bytes]] = field(default_factory=dict)
    """Byte markers found in scanned files (e.g. b"libnccl.so" inside libtorch_cuda.so), by path."""


@dataclass(frozen=True)
class Policy:
    """What the audit wants beyond metadata: `keep(path)` bytes of content, `scan(path)` markers to look for."""

    keep: Callable[[str], int]
    scan: Callable[[str], tuple[bytes, ...]]
    on_layer: Callable[[str, list[int]], None] | None = None
    """Told of each layer as it starts ('PATH: layer 2/7 sha256:...') with the image's live count of
    uncompressed bytes read (a one-element list the readers keep adding to): the command's progress."""


def _json(data: bytes, what: str) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{what} is not valid JSON: {str(exc)[:120]}") from None


def _obj(value: Any, what: str) -> dict[str, Any]:
    """A JSON object as read, before its fields are checked."""
    if not isinstance(value, dict):
        raise InputError(f"{what} is not a JSON object (found {type(value).__name__})")
    return value


class Layers:
    """Applies layers to one tree, counting the uncompressed budget across the whole image."""

    def __init__(self, limits: Limits, policy: Policy) -> None:
        self.limits, self.policy, self.verify_diff_ids = limits, policy, limits.verify_diff_ids
        self.tree = Tree(limits, policy.keep)
        self.budget = [0]
        self.markers: dict[str, tuple[int, set[bytes]]] = {}
        self.info: list[LayerInfo] = []

    def apply(self, blob: Readable, what: str, blob_hash: Hashing | None, diff_id: str | None) -> None:
        if self.policy.on_layer is not None:
            self.policy.on_layer(what, self.budget)
        ahead = ReadAhead(blob)
        try:
            self._apply(ahead, what, blob_hash, diff_id)
        finally:
            ahead.close()

    def _apply(self, ahead: ReadAhead, what: str, blob_hash: Hashing | None, diff_id: str | None) -> None:
        peek = Peek(ahead)
        compression = compression_of(peek.head)
        inflated: Readable = peek
        inflater: ReadAhead | None = None
        if compression != "none":  # a second stage: inflate on its own thread while this one parses
            inflater = inflated = ReadAhead(decompressed(peek, compression, what), depth=2)
        try:
            self._parse(inflated, compression, what, blob_hash, diff_id, ahead)
        finally:
            if inflater is not None:
                inflater.close()

    def _parse(
        self,
        inflated: Readable,
        compression: str,
        what: str,
        blob_hash: Hashing | None,
        diff_id: str | None,
        ahead: ReadAhead,
    ) -> None:
        stream: Readable = BombGuard(
            inflated, blob_hash if compression != "none" else None, self.budget, self.limits, what
        )
        uncompressed: Hashing | None = None
        # A verified blob digest already pins the uncompressed bytes; the diff_id is checked as well
        # when it is the only digest there is (docker-save layers) or when asked (--verify-diff-ids).
        blob_verified = blob_hash is not None and blob_hash.expected is not None
        if compression != "none" and diff_id is not None and (self.verify_diff_ids or not blob_verified):
            uncompressed = Hashing(stream, diff_id, f"{what} (uncompressed)")
            stream = uncompressed
        tar = TarStream(stream, what, self.limits.max_entry_bytes)
        tree = self.tree
        for m in tar.members():
            path = tree.apply(m.name, m.type, m.size, m.mode, m.uid, m.linkname, what, tar.read_content)
            if path is not None:
                wanted = self.policy.scan(path)
                if wanted:
                    self.markers[path] = (tree.layer, scan_markers(tar.content_chunks(), wanted))
        tar.drain()
        ahead.finish()
        entry = LayerInfo(compression=compression, entries=tar.count)
        if uncompressed is not None:
            entry["diff_id"] = uncompressed.verify()
        if blob_hash is not None:
            entry["digest"] = blob_hash.verify()
            entry["size_bytes"] = blob_hash.count
            if compression == "none" and diff_id is not None and blob_hash.digest != diff_id:
                raise InputError(
                    f"{what} has digest {blob_hash.digest}, its config lists diff_id {diff_id}: "
                    "the archive is corrupt or was modified"
                )
            if compression == "none":
                entry["diff_id"] = blob_hash.digest
        self.info.append(entry)
        tree.layer += 1

    def image(self, config: ImageConfig | None, info: ArchiveInfo) -> Image:
        info["layers"] = self.info
        info["layer_count"] = len(self.info)
        info["uncompressed_bytes"] = self.budget[0]
        info["entries"] = self.tree.entries
        info["whiteouts"] = self.tree.whiteouts
        info["special_files"] = self.tree.skipped[:20]
        live: dict[str, set[bytes]] = {}
        for path, (layer, found) in self.markers.items():
            hit = self.tree.lookup(path, follow=False)
            if hit is not None and hit[1].layer == layer:
                live[path] = found
        return Image(self.tree, config, info, live)


# -- stores: where blobs come from ----------------------------------------------------------------
class DirStore:
    """An OCI layout directory; every path is opened component by component with O_NOFOLLOW."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise InputError(f"cannot open {path}: {exc.strerror}") from None

    def close(self) -> None:
        os.close(self._fd)

    def _open(self, name: str) -> tuple[BinaryIO, int]:
        parts = name.split("/")
        fd = os.dup(self._fd)
        try:
            for part in parts[:-1]:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = nxt
            leaf = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError as exc:
            raise InputError(
                f"{self.path}: cannot open {name} ({exc.strerror}); the layout is incomplete, or a "
                "component is a symbolic link, which an OCI layout does not use"
            ) from None
        finally:
            os.close(fd)
        st = os.fstat(leaf)
        if not stat.S_ISREG(st.st_mode):
            os.close(leaf)
            raise InputError(f"{self.path}: {name} is not a regular file")
        return os.fdopen(leaf, "rb"), st.st_size

    def has(self, name: str) -> bool:
        try:
            f, _ = self._open(name)
        except InputError:
            return False
        f.close()
        return True

    def read(self, name: str, limit: int) -> bytes:
        f, size = self._open(name)
        with f:
            if size > limit:
                raise InputError(f"{self.path}: {name} is {size} bytes, more than the {limit} a metadata file may hold")
            return f.read(limit)

    def blob(self, name: str) -> tuple[Readable, int, Callable[[], None]]:
        f, size = self._open(name)
        return Slice(f, 0, size, f"{self.path}: {name}"), size, f.close


class TarStore:
    """Members of an uncompressed outer tar (docker save, OCI archive), read in place by offset."""

    def __init__(self, path: str, f: BinaryIO, members: dict[str, tarfile.TarInfo]) -> None:
        self.path, self._f, self.members = path, f, members

    def close(self) -> None:
        self._f.close()

    def _member(self, name: str) -> tarfile.TarInfo:
        hops = 0
        key = _norm(name, self.path)
        while True:
            info = self.members.get(key)
            if info is None:
                raise InputError(f"{self.path}: the manifest names {name!r}, which the archive does not hold")
            if not (info.issym() or info.islnk()):
                break
            hops += 1
            if hops > 8:
                raise InputError(f"{self.path}: {name!r} is a loop of links")
            base = key.rsplit("/", 1)[0] if info.issym() and "/" in key else ""
            key = _resolve_member(base, info.linkname, self.path) if info.issym() else _norm(info.linkname, self.path)
        if not info.isreg():
            raise InputError(f"{self.path}: {name!r} is not a regular file in the archive")
        return info

    def has(self, name: str) -> bool:
        try:
            self._member(name)
        except InputError:
            return False
        return True

    def read(self, name: str, limit: int) -> bytes:
        info = self._member(name)
        if info.size > limit:
            raise InputError(
                f"{self.path}: {name} is {info.size} bytes, more than the {limit} a metadata file may hold"
            )
        src = Slice(self._f, info.offset_data, info.size, f"{self.path}: {name}")
        return b"".join(iter(lambda: src.read(CHUNK), b""))

    def blob(self, name: str) -> tuple[Readable, int, Callable[[], None]]:
        info = self._member(name)
        return Slice(self._f, info.offset_data, info.size, f"{self.path}: {name}"), info.size, lambda: None


Store = DirStore | TarStore


def _norm(name: str, what: str) -> str:
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/") or ".." in parts or not parts:
        raise InputError(f"{what}: {name[:200]!r} points outside the archive; refusing it")
    return "/".join(parts)


def _resolve_member(base: str, link: str, what: str) -> str:
    """A symlink member's target inside the archive (docker save links `ID/layer.tar -> ../HEX.tar`)."""
    parts: list[str] = []
    for p in f"{base}/{link}".split("/") if not link.startswith("/") else link.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not parts:
                raise InputError(f"{what}: the link {link[:200]!r} points outside the archive; refusing it")
            parts.pop()
        else:
            parts.append(p)
    if not parts:
        raise InputError(f"{what}: the link {link[:200]!r} points at nothing")
    return "/".join(parts)


def _blob_name(digest: str) -> str:
    algo, hexd = digest.split(":", 1)
    return f"blobs/{algo}/{hexd}"


def _platform_of(value: str) -> dict[str, str]:
    parts = value.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise InputError(f"--platform {value!r}: expected OS/ARCH or OS/ARCH/VARIANT, e.g. linux/amd64")
    out = {"os": parts[0], "architecture": parts[1]}
    if len(parts) == 3:
        out["variant"] = parts[2]
    return out


def _matches(platform: Any, want: dict[str, str]) -> bool:
    if not isinstance(platform, dict):
        return False
    if platform.get("os") != want["os"] or platform.get("architecture") != want["architecture"]:
        return False
    return "variant" not in want or platform.get("variant") == want["variant"]


# -- OCI (layout directory or archive) --------------------------------------------------------------
def _descriptor(value: Any, what: str) -> Descriptor:
    d = _obj(value, what)
    check_digest(d.get("digest"), what)
    size = d.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise InputError(f"{what}: size {str(size)[:40]!r} is not a non-negative integer")
    annotations = d.get("annotations")
    if annotations is not None and not isinstance(annotations, dict):
        raise InputError(f"{what}: annotations is a {type(annotations).__name__}, expected an object")
    return cast(Descriptor, d)


def _read_blob_json(store: Store, desc: Descriptor, limits: Limits, what: str) -> Any:
    digest = desc["digest"]
    if desc["size"] > limits.max_metadata_bytes:
        raise InputError(
            f"{what} declares {desc['size']} bytes; a manifest or config holds at most {limits.max_metadata_bytes}"
        )
    src, _, close = store.blob(_blob_name(digest))
    try:
        h = Hashing(src, digest, f"{what} {digest[:19]}", desc["size"])
        data = b"".join(iter(lambda: h.read(CHUNK), b""))
        h.verify()
    finally:
        close()
    return _json(data, f"{what} {digest[:19]}")


def _pick_manifest(
    store: Store, index: dict[str, Any], want: dict[str, str], limits: Limits, depth: int = 0
) -> Descriptor:
    manifests = index.get("manifests")
    if not isinstance(manifests, list) or not manifests:
        raise InputError(f"{store.path}: the image index lists no manifests")
    descs = [_descriptor(m, f"{store.path}: index entry") for m in manifests]
    candidates = [d for d in descs if _matches(d.get("platform"), want)]
    untagged = [d for d in descs if "platform" not in d]
    if not candidates and len(untagged) == 1 and len(descs) == 1:
        candidates = untagged  # a single image saved without platform data
    if not candidates:
        nested = [d for d in descs if d.get("mediaType") in INDEX_TYPES]
        if len(nested) == 1 and depth < 4:
            inner = _obj(_read_blob_json(store, nested[0], limits, f"{store.path}: nested index"), "nested index")
            return _pick_manifest(store, inner, want, limits, depth + 1)
        seen = sorted(
            {
                "/".join(str(platform.get(k, "?")) for k in ("os", "architecture"))
                for d in descs
                if isinstance(platform := d.get("platform"), dict)
            }
        )
        raise InputError(
            f"{store.path}: no image for platform {'/'.join(want.values())}; the index has "
            f"{', '.join(seen) or 'entries without a platform'} (use --platform)"
        )
    chosen = candidates[0]
    if chosen.get("mediaType") in INDEX_TYPES:
        if depth >= 4:
            raise InputError(f"{store.path}: image indexes nested more than 4 deep")
        inner = _obj(_read_blob_json(store, chosen, limits, f"{store.path}: nested index"), "nested index")
        return _pick_manifest(store, inner, want, limits, depth + 1)
    return Descriptor(**chosen)


def load_oci(store: Store, fmt: str, platform: str, limits: Limits, policy: Policy) -> Image:
    want = _platform_of(platform)
    index = _obj(_json(store.read("index.json", limits.max_metadata_bytes), f"{store.path}: index.json"), "index.json")
    mdesc = _pick_manifest(store, index, want, limits)
    manifest = _obj(_read_blob_json(store, mdesc, limits, f"{store.path}: manifest"), "manifest")
    cdesc = _descriptor(manifest.get("config"), f"{store.path}: manifest config")
    config = checked_config(
        _obj(_read_blob_json(store, cdesc, limits, f"{store.path}: config"), "config"), f"{store.path}: config"
    )
    layers = manifest.get("layers")
    if not isinstance(layers, list):
        raise InputError(f"{store.path}: the manifest has no 'layers' list")
    descs = [_descriptor(layer, f"{store.path}: layer {i + 1}") for i, layer in enumerate(layers)]
    diff_ids = _diff_ids(config, len(descs), store.path)
    applier = Layers(limits, policy)
    for i, (desc, diff_id) in enumerate(zip(descs, diff_ids)):
        what = f"{store.path}: layer {i + 1}/{len(descs)} {desc['digest'][:19]}"
        if desc["size"] > limits.max_entry_bytes:
            raise InputError(
                f"{what} declares {desc['size']} bytes, over the limit of {limits.max_entry_bytes} (--max-entry-bytes)"
            )
        src, _, close = store.blob(_blob_name(desc["digest"]))
        try:
            h = Hashing(src, desc["digest"], what, desc["size"])
            applier.apply(h, what, h, diff_id)
        finally:
            close()
    info = ArchiveInfo(
        format=fmt,
        platform=platform,
        manifest_digest=mdesc["digest"],
        config_digest=cdesc["digest"],
        compressed_bytes=sum(d["size"] for d in descs),
        verified_blobs=len(descs) + 2,
        ref=(mdesc.get("annotations") or {}).get("org.opencontainers.image.ref.name"),
    )
    return applier.image(config, info)


_CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    "User": (str,),
    "Env": (list,),
    "Entrypoint": (list, str),
    "Cmd": (list, str),
    "WorkingDir": (str,),
    "Labels": (dict,),
    "ExposedPorts": (dict,),
}


def checked_config(config: dict[str, Any], what: str) -> ImageConfig:
    """The image config, with the fields the audit reads checked for type (a wrong type is malformed input)."""
    section = config.get("config")
    if section is None:
        return cast(ImageConfig, config)
    if not isinstance(section, dict):
        raise InputError(f"{what}: the image config's 'config' is a {type(section).__name__}, expected an object")
    for key, types in _CONFIG_TYPES.items():
        value = section.get(key)
        if value is not None and not isinstance(value, types):
            raise InputError(
                f"{what}: config.{key} is a {type(value).__name__}, expected {' or '.join(t.__name__ for t in types)}"
            )
    for key in ("Env", "Entrypoint", "Cmd"):
        if isinstance(section.get(key), list) and not all(isinstance(x, str) for x in section[key]):
            raise InputError(f"{what}: config.{key} must be a list of strings")
    if isinstance(section.get("Labels"), dict) and not all(isinstance(v, str) for v in section["Labels"].values()):
        raise InputError(f"{what}: config.Labels values must be strings")
    for key in ("architecture", "os", "created"):
        if config.get(key) is not None and not isinstance(config[key], str):
            raise InputError(f"{what}: the image config's {key} is not a string")
    return cast(ImageConfig, config)


def _diff_ids(config: ImageConfig, count: int, what: str) -> list[str | None]:
    rootfs: object = config.get("rootfs")
    ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(ids, list):
        raise InputError(f"{what}: the image config has no rootfs.diff_ids")
    if len(ids) != count:
        raise InputError(
            f"{what}: the manifest lists {plural(count, 'layer')}, the config {plural(len(ids), 'diff_id')}"
        )
    return [check_digest(d, f"{what}: config diff_id") for d in ids]


# -- docker save -----------------------------------------------------------------------------------
def load_docker(store: TarStore, platform: str, limits: Limits, policy: Policy) -> Image:
    want = _platform_of(platform)
    manifest = _json(store.read("manifest.json", limits.max_metadata_bytes), f"{store.path}: manifest.json")
    if not isinstance(manifest, list) or not manifest:
        raise InputError(f"{store.path}: manifest.json is not a non-empty list of images")
    entries = [_obj(e, f"{store.path}: manifest.json entry") for e in manifest]
    chosen: tuple[dict[str, Any], ImageConfig, str] | None = None
    for entry in entries:
        name = entry.get("Config")
        if not isinstance(name, str):
            raise InputError(f"{store.path}: manifest.json entry has no 'Config' file name")
        data = store.read(name, limits.max_metadata_bytes)
        match = _HEX_NAME.search(_norm(name, store.path))
        digest = None
        if match:
            h = Hashing(Peek_bytes(data), f"sha256:{match.group(1)}", f"{store.path}: config {name}")
            digest = h.verify()
        config = checked_config(
            _obj(_json(data, f"{store.path}: {name}"), f"{store.path}: {name}"), f"{store.path}: {name}"
        )
        if chosen is None or (_matches(config, want) and not _matches(chosen[1], want)):
            chosen = (entry, config, digest or "")
    assert chosen is not None
    entry, config, config_digest = chosen
    layers = entry.get("Layers")
    if not isinstance(layers, list) or not all(isinstance(x, str) for x in layers):
        raise InputError(f"{store.path}: manifest.json entry has no 'Layers' list of file names")
    diff_ids = _diff_ids(config, len(layers), store.path)
    applier = Layers(limits, policy)
    compressed = 0
    for i, (name, diff_id) in enumerate(zip(layers, diff_ids)):
        what = f"{store.path}: layer {i + 1}/{len(layers)} {name[:80]}"
        src, size, close = store.blob(name)
        if size > limits.max_entry_bytes:
            raise InputError(f"{what} is {size} bytes, over the limit of {limits.max_entry_bytes} (--max-entry-bytes)")
        compressed += size
        match = _HEX_NAME.search(_norm(name, store.path))
        stored = f"sha256:{match.group(1)}" if match and "blobs/" in name else None
        h = Hashing(src, stored, what, size)
        applier.apply(h, what, h, diff_id)
        close()
    info = ArchiveInfo(
        format="docker-archive",
        platform=platform,
        config_digest=config_digest or None,
        repo_tags=[t for t in tags if isinstance(t, str)] if isinstance(tags := entry.get("RepoTags"), list) else [],
        compressed_bytes=compressed,
        verified_blobs=len(layers) + (1 if config_digest else 0),
        images_in_archive=len(entries),
    )
    return applier.image(config, info)


class Peek_bytes:
    def __init__(self, data: bytes) -> None:
        self._data, self._pos = data, 0

    def read(self, n: int = -1, /) -> bytes:
        n = len(self._data) - self._pos if n < 0 else n
        out = self._data[self._pos : self._pos + n]
        self._pos += len(out)
        return out


# -- rootfs ----------------------------------------------------------------------------------------
def load_rootfs_stream(src: Readable, path: str, fmt: str, limits: Limits, policy: Policy) -> Image:
    applier = Layers(limits, policy)
    counted = Hashing(src, None, path)  # counts bytes for the bomb guard; a rootfs has no digest to check
    applier.apply(counted, path, counted, None)
    return applier.image(
        None,
        ArchiveInfo(
            format=fmt, verified_blobs=0, note="a rootfs carries no digests and no config (User, Env, Entrypoint)"
        ),
    )


def load_rootfs_dir(path: str, limits: Limits, policy: Policy) -> Image:
    applier = Layers(limits, policy)
    scanned = walk_into(path, applier.tree, policy.scan)
    applier.markers.update({name: (applier.tree.layer, found) for name, found in scanned.items()})
    return applier.image(
        None,
        ArchiveInfo(
            format="rootfs-dir",
            verified_blobs=0,
            note="a rootfs directory carries no digests and no config (User, Env, Entrypoint)",
        ),
    )


# -- entry point -----------------------------------------------------------------------------------
def _outer_members(path: str, f: BinaryIO) -> dict[str, tarfile.TarInfo] | None:
    """The members of an image archive, or None when the tar is a rootfs (some member is a file path)."""
    members: dict[str, tarfile.TarInfo] = {}
    try:
        tf = tarfile.open(fileobj=f, mode="r:")  # noqa: SIM115 - closing it would close f, which the caller owns
        while True:
            info = tf.next()
            tf.members.clear()  # type: ignore[attr-defined]  # a rootfs tar can hold millions; keep only ours
            if info is None:
                break
            name = "/".join(p for p in info.name.split("/") if p not in ("", "."))
            if not name:
                continue
            if not _ARCHIVE_NAME.match(name):
                return None
            members[name] = info
            if len(members) > 100_000:
                raise InputError(f"{path}: more than 100000 members in an image archive")
    except tarfile.TarError as exc:
        raise InputError(f"{path} is not a readable tar archive: {exc}") from None
    return members


def load(path: str, platform: str = "linux/amd64", limits: Limits | None = None, policy: Policy | None = None) -> Image:
    limits = limits or Limits()
    policy = policy or Policy(keep=lambda p: 0, scan=lambda p: ())
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        store = DirStore(path)
        try:
            if store.has("oci-layout") or store.has("index.json"):
                _check_layout(store, limits)
                return load_oci(store, "oci-layout", platform, limits, policy)
        finally:
            store.close()
        return load_rootfs_dir(path, limits, policy)
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path} is neither a file nor a directory")
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed in finally, or handed to a TarStore
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        head = f.read(512)
        compression = compression_of(head)
        f.seek(0)
        if compression != "none":
            return _load_compressed(path, f, st.st_size, compression, limits, policy)
        if len(head) < 512:
            raise InputError(f"{path} is {st.st_size} bytes: too short to be a tar archive or an image")
        members = _outer_members(path, f)
        if members is None:
            return load_rootfs_stream(Slice(f, 0, st.st_size, path), path, "rootfs-tar", limits, policy)
        tar_store = TarStore(path, f, members)
        if "index.json" in members and ("oci-layout" in members or "manifest.json" not in members):
            return load_oci(tar_store, "oci-archive", platform, limits, policy)
        if "manifest.json" in members:
            return load_docker(tar_store, platform, limits, policy)
        raise InputError(
            f"{path}: a tar of image blobs without manifest.json or index.json; save the image with "
            "'docker save', 'podman save' or 'skopeo copy ... oci-archive:FILE'"
        )
    finally:
        f.close()


def _check_layout(store: DirStore, limits: Limits) -> None:
    if store.has("oci-layout"):
        layout = _json(store.read("oci-layout", limits.max_metadata_bytes), f"{store.path}: oci-layout")
        if not isinstance(layout, dict) or "imageLayoutVersion" not in layout:
            raise InputError(f"{store.path}: oci-layout has no imageLayoutVersion")


def _load_compressed(path: str, f: BinaryIO, size: int, compression: str, limits: Limits, policy: Policy) -> Image:
    what = f"{path} ({compression})"
    probe = TarStream(decompressed(Slice(f, 0, size, path), compression, what), what, limits.max_entry_bytes)
    first = next(probe.members(), None)
    if first is not None:
        name = "/".join(p for p in first.name.split("/") if p not in ("", "."))
        if name and _ARCHIVE_NAME.match(name):
            raise InputError(
                f"{path} is a compressed image archive; decompress it first (e.g. 'gunzip -k {path}' or "
                "'zstd -d'), since its layers need random access"
            )
    f.seek(0)
    return load_rootfs_stream(Slice(f, 0, size, path), path, f"rootfs-tar+{compression}", limits, policy)
