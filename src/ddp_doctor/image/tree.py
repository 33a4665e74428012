"""The merged filesystem of an image, in memory: metadata for every entry, content for a few.

Layers are applied in order with OCI whiteouts (`.wh.NAME` hides NAME, `.wh..wh..opq` hides
everything a lower layer put in that directory). Paths are resolved the way a chroot would: an
absolute link target starts at the image root, and `..` at the root stays at the root, so no
lookup ever leaves the image.
"""

from __future__ import annotations

import tarfile
from collections.abc import Callable, Iterator

from ddp_doctor.errors import InputError
from ddp_doctor.image.limits import Limits
from ddp_doctor.words import plural

FILE, DIR, SYMLINK, OTHER = "file", "dir", "symlink", "other"
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MAX_HOPS = 40

_KIND = {
    tarfile.REGTYPE: FILE,
    tarfile.AREGTYPE: FILE,
    tarfile.CONTTYPE: FILE,
    tarfile.DIRTYPE: DIR,
    tarfile.SYMTYPE: SYMLINK,
    tarfile.CHRTYPE: OTHER,
    tarfile.BLKTYPE: OTHER,
    tarfile.FIFOTYPE: OTHER,
}


class Node:
    __slots__ = ("children", "data", "kind", "layer", "link", "mode", "size", "uid")

    def __init__(
        self, kind: str, size: int = 0, mode: int = 0o755, uid: int = 0, link: str = "", layer: int = -1
    ) -> None:
        self.kind, self.size, self.mode, self.uid, self.link, self.layer = kind, size, mode, uid, link, layer
        self.data: bytes | None = None
        self.children: dict[str, Node] | None = {} if kind == DIR else None

    def copy(self, layer: int) -> Node:
        other = Node(self.kind, self.size, self.mode, self.uid, self.link, layer)
        other.data = self.data
        return other


def split_member(name: str, what: str) -> list[str]:
    """A member name as path components; absolute names and `..` are refused, not rewritten."""
    if "\0" in name:
        raise InputError(f"{what}: member name {name[:200]!r} contains a NUL byte")
    if name.startswith("/"):
        raise InputError(
            f"{what}: member {name[:200]!r} is an absolute path; image layers hold relative paths "
            "(an archive built to write outside its root)"
        )
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InputError(
            f"{what}: member {name[:200]!r} contains '..'; refusing an archive that points outside its root"
        )
    return parts


class Tree:
    def __init__(self, limits: Limits, keep: Callable[[str], int] | None = None) -> None:
        self.root = Node(DIR)
        self.limits = limits
        self._keep = keep or (lambda path: 0)
        self.entries = 0
        self.kept_bytes = 0
        self.layer = 0
        self.whiteouts = 0
        self.skipped: list[str] = []
        """Entries recorded as metadata only (devices, FIFOs) or ignored (AUFS hardlink dirs)."""

    # -- lookups -------------------------------------------------------------------------------
    def lookup(self, path: str, follow: bool = True) -> tuple[str, Node] | None:
        """The node at `path` inside the image, links resolved within the root; None if absent."""
        return self._walk([p for p in path.split("/") if p not in ("", ".")], follow, 0)

    def _walk(self, parts: list[str], follow: bool, hops: int) -> tuple[str, Node] | None:
        names: list[str] = []
        nodes = [self.root]  # nodes[i] is the node at names[:i]
        todo = list(reversed(parts))
        while todo:
            part = todo.pop()
            if part in ("", "."):
                continue
            if part == "..":
                if names:
                    names.pop()
                    nodes.pop()
                continue
            children = nodes[-1].children
            child = children.get(part) if children is not None else None
            if child is None:
                return None
            if child.kind == SYMLINK and (todo or follow):
                hops += 1
                if hops > MAX_HOPS:
                    return None
                if child.link.startswith("/"):
                    names, nodes = [], [self.root]
                todo.extend(reversed([p for p in child.link.split("/") if p not in ("", ".")]))
                continue
            names.append(part)
            nodes.append(child)
        return "/" + "/".join(names), nodes[-1]

    def walk(self) -> Iterator[tuple[str, Node]]:
        """Every entry as (absolute path, node), depth first, without following links."""
        todo: list[tuple[str, Node]] = [("", self.root)]
        while todo:
            prefix, node = todo.pop()
            for name, child in (node.children or {}).items():
                path = f"{prefix}/{name}"
                yield path, child
                if child.children is not None:
                    todo.append((path, child))

    def read(self, path: str) -> bytes | None:
        found = self.lookup(path)
        return found[1].data if found and found[1].kind == FILE else None

    # -- building ------------------------------------------------------------------------------
    def _parent(self, parts: list[str], what: str) -> Node:
        """The directory that holds parts[-1], created as needed; links are followed inside the root."""
        node = self.root
        for i, part in enumerate(parts[:-1]):
            assert node.children is not None
            if part.startswith(WHITEOUT):
                raise InputError(
                    f"{what}: {'/'.join(parts)[:200]!r} puts an entry inside a whiteout; the archive is malformed"
                )
            child = node.children.get(part)
            if child is not None and child.kind == SYMLINK:
                found = self.lookup("/".join(parts[: i + 1]))
                child = found[1] if found and found[1].kind == DIR else None
                if child is None:
                    raise InputError(
                        f"{what}: {'/'.join(parts)[:200]!r} goes through a link that leads to no "
                        "directory inside the image"
                    )
            elif child is None or child.kind != DIR:
                child = Node(DIR, layer=self.layer)
                self._count(what)
                node.children[part] = child
            node = child
        return node

    def _count(self, what: str) -> None:
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise InputError(
                f"{what}: more than {plural(self.limits.max_entries, 'entry', 'entries')} (limit --max-entries)"
            )

    def apply(
        self,
        name: str,
        type_: bytes,
        size: int,
        mode: int,
        uid: int,
        linkname: str,
        what: str,
        read: Callable[[int], bytes],
    ) -> str | None:
        """Apply one layer entry. Returns the entry's absolute path when its content is wanted whole."""
        parts = split_member(name, what)
        if not parts:
            if type_ == tarfile.DIRTYPE:
                self.root.mode = mode
            return None
        base = parts[-1]
        if base.startswith(WHITEOUT):
            self._whiteout(parts, what)
            return None
        parent = self._parent(parts, what)
        assert parent.children is not None
        path = "/" + "/".join(parts)
        if type_ == tarfile.LNKTYPE:
            target_parts = split_member(linkname, f"{what}: hardlink {name[:200]!r}")
            found = self._walk(target_parts, False, 0) if target_parts else None
            if found is None or found[1].kind == DIR:
                raise InputError(
                    f"{what}: hardlink {name[:200]!r} points at {linkname[:200]!r}, which is "
                    "not a file an earlier entry created"
                )
            node = found[1].copy(self.layer)
        else:
            kind = _KIND.get(type_, FILE)
            node = Node(kind, size if kind == FILE else 0, mode, uid, linkname if kind == SYMLINK else "", self.layer)
            if kind == OTHER:
                self.skipped.append(path)
        old = parent.children.get(base)
        if old is not None and old.kind == DIR and node.kind == DIR:
            old.mode, old.uid, old.layer = node.mode, node.uid, self.layer  # a dir entry keeps its children
            return None
        if old is None:
            self._count(what)
        parent.children[base] = node
        if node.kind == FILE and type_ != tarfile.LNKTYPE:
            want = self._keep(path)
            if want:
                limit = min(want, self.limits.max_kept_bytes, self.limits.max_kept_total_bytes - self.kept_bytes)
                if limit > 0:
                    node.data = read(limit)
                    self.kept_bytes += len(node.data)
        return path

    def _whiteout(self, parts: list[str], what: str) -> None:
        base = parts[-1]
        self.whiteouts += 1
        found = self.lookup("/".join(parts[:-1]))
        directory = found[1] if found and found[1].kind == DIR else None
        if base == OPAQUE:
            if directory is not None:
                self._hide_lower(directory)
            return
        if base.startswith(WHITEOUT + WHITEOUT):
            self.skipped.append("/" + "/".join(parts))  # AUFS bookkeeping (.wh..wh.plnk), not a whiteout
            return
        target = base[len(WHITEOUT) :]
        if target in ("", ".", ".."):
            raise InputError(
                f"{what}: whiteout {'/'.join(parts)[:200]!r} names {target!r}; a whiteout hides one "
                "entry of its directory, so this archive is malformed"
            )
        if directory is None or directory.children is None:
            return
        victim = directory.children.get(target)
        if victim is None:
            return
        if victim.layer < self.layer:
            del directory.children[target]
        elif victim.kind == DIR:
            self._hide_lower(victim)

    def _hide_lower(self, directory: Node) -> None:
        """Drop what lower layers put under `directory`; entries of this layer stay."""
        todo = [directory]
        while todo:
            d = todo.pop()
            assert d.children is not None
            for name in [n for n, c in d.children.items() if c.layer < self.layer]:
                del d.children[name]
            todo.extend(c for c in d.children.values() if c.kind == DIR)
