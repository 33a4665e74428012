"""Walk a rootfs directory into a Tree by file descriptors: no link is followed, no mount crossed."""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Callable, Iterator

from ddp_doctor.errors import InputError
from ddp_doctor.image.streams import CHUNK, scan_markers
from ddp_doctor.image.tree import Tree

_TYPE = (
    (stat.S_ISREG, tarfile.REGTYPE),
    (stat.S_ISDIR, tarfile.DIRTYPE),
    (stat.S_ISLNK, tarfile.SYMTYPE),
    (stat.S_ISCHR, tarfile.CHRTYPE),
    (stat.S_ISBLK, tarfile.BLKTYPE),
    (stat.S_ISFIFO, tarfile.FIFOTYPE),
)


def _type(mode: int) -> bytes | None:
    for test, t in _TYPE:
        if test(mode):
            return t
    return None  # sockets: nothing an image carries


def walk_into(root: str, tree: Tree, scan: Callable[[str], tuple[bytes, ...]]) -> dict[str, set[bytes]]:
    """Every entry under `root` into `tree`, one directory at a time through open fds (never a path a
    link could redirect); returns path -> the markers found in it (the policy's scan asked for them)."""
    try:
        top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise InputError(f"cannot open {root}: {exc.strerror}") from None
    device = os.fstat(top).st_dev
    todo: list[tuple[int, str]] = [(top, "")]
    scanned: dict[str, set[bytes]] = {}
    try:
        while todo:
            dfd, rel = todo.pop()
            try:
                with os.scandir(dfd) as it:
                    entries = [(e.name, e.stat(follow_symlinks=False)) for e in it]
            except OSError as exc:
                raise InputError(f"cannot list {root}/{rel}: {exc.strerror}") from None
            for name, st in sorted(entries):
                t = _type(st.st_mode)
                if t is None:
                    continue
                path = f"{rel}/{name}" if rel else name
                _add(root, tree, scan, scanned, dfd, name, path, t, st)
                if t == tarfile.DIRTYPE and st.st_dev == device:
                    sub = _open_dir(root, dfd, name, path)
                    if sub is not None:
                        todo.append((sub, path))
            if dfd != top:
                os.close(dfd)
    finally:
        for dfd, _ in todo:
            if dfd != top:
                os.close(dfd)
        os.close(top)
    return scanned


def _add(
    root: str,
    tree: Tree,
    scan: Callable[[str], tuple[bytes, ...]],
    scanned: dict[str, set[bytes]],
    dfd: int,
    name: str,
    path: str,
    t: bytes,
    st: os.stat_result,
) -> None:
    """One entry into the tree; a file the policy wants is read (and scanned) through its own fd."""
    link = os.readlink(name, dir_fd=dfd) if t == tarfile.SYMTYPE else ""
    fd: int | None = None

    def read(n: int) -> bytes:
        nonlocal fd
        fd = _open_file(name, dfd, root, path)
        return os.read(fd, n) if fd is not None else b""

    try:
        full = tree.apply(
            path,
            t,
            st.st_size if t == tarfile.REGTYPE else 0,
            stat.S_IMODE(st.st_mode),
            st.st_uid,
            link,
            root,
            read,
        )
        if full is not None:
            wanted = scan(full)
            if wanted:
                fd = fd if fd is not None else _open_file(name, dfd, root, path)
                if fd is not None:
                    os.lseek(fd, 0, os.SEEK_SET)
                    scanned[full] = scan_markers(_chunks(fd), wanted)
    finally:
        if fd is not None:
            os.close(fd)


def _open_dir(root: str, dfd: int, name: str, path: str) -> int | None:
    """A sub-directory's fd, or None when it was replaced by a link or removed while we walked."""
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
    except PermissionError:
        # What it holds is unknown: an audit without it could call a present Python missing.
        raise InputError(_unreadable(root, path)) from None
    except OSError:
        return None


def _unreadable(root: str, path: str) -> str:
    return (
        f"cannot read {root}/{path}: permission denied; audit the rootfs as a user who can read all of it "
        "(its owner, or root), or give the image as a tar archive"
    )


def _open_file(name: str, dfd: int, root: str = "", path: str = "") -> int | None:
    """The file, opened for reading; None when it is not a regular file (or vanished). A file the
    audit needs but may not read is an InputError: its content would be judged as missing."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dfd)
    except PermissionError:
        raise InputError(_unreadable(root, path or name)) from None
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _chunks(fd: int) -> Iterator[bytes]:
    while chunk := os.read(fd, CHUNK):
        yield chunk
