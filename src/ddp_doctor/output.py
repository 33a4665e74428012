"""Write a report where `--output` says, through whatever that path is.

A regular file (or a name that does not exist yet) is replaced atomically: temp file + rename, so a
reader never sees half a report. Anything else is written in place and never replaced: a character
device (`/dev/null`, a terminal), a FIFO or process substitution (`--output >(jq .)`), `/dev/stdout`.
A symlink is followed, so the link stays and its target gets the report.

`refuse_before_work` runs before the command does anything: a report that could not be written
(a missing directory, a directory, no write permission, a closed stdout) or that would replace one
of the command's own inputs (the same file through a symlink or a hard link, or a file inside an
input directory) is a UsageError then, not after a run of minutes.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
import tempfile
from collections.abc import Iterable

from ddp_doctor.errors import DoctorError, UsageError

# Names of this process's own standard streams: writing to the open stream keeps the shell's
# redirection as it is (`>> log` appends; reopening /proc/self/fd/1 with O_TRUNC would not).
_STREAMS = {
    "-": 1,
    "/dev/stdout": 1,
    "/dev/fd/1": 1,
    "/proc/self/fd/1": 1,
    "/dev/stderr": 2,
    "/dev/fd/2": 2,
    "/proc/self/fd/2": 2,
}


def refuse_before_work(output: str | None, inputs: Iterable[str], flag: str = "--output") -> None:
    """A UsageError when the report cannot go to `output`, or would overwrite one of `inputs`."""
    fd = 1 if output is None else _STREAMS.get(output)
    if fd is not None:
        if (sys.stdout if fd == 1 else sys.stderr) is None:
            raise UsageError(f"standard {'output' if fd == 1 else 'error'} is closed: pass {flag} FILE")
        return
    assert output is not None
    try:
        st = os.stat(output)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"cannot write {flag} {output}: {_reason(exc)}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"cannot write {flag} {output}: it is a directory; give a file name")
    if st is not None and not stat.S_ISREG(st.st_mode):
        return  # a device or FIFO is written in place: nothing in it is replaced
    target = os.path.realpath(output)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise UsageError(f"cannot write {flag} {output}: the directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write {flag} {output}: no permission to write in {folder}")
    for given in inputs:
        clash = _clash(st, target, given)
        if clash:
            raise UsageError(f"{flag} {output} would {clash} {given}: write the report somewhere else")


def _clash(st: os.stat_result | None, target: str, given: str) -> str | None:
    """How the report's target meets the input `given`: the same file (same inode, so symlinks
    and hard links too), or a file inside an input directory; None when it does not."""
    try:
        other = os.stat(given)
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(other.st_mode):
        folder = os.path.realpath(given)
        if folder == os.path.realpath(os.sep):
            # The running system's root (`image /`): every path is inside it, so refusing would refuse every
            # report; the report is written after the scan and changes nothing that was judged.
            return None
        return "write inside the input directory" if os.path.commonpath([target, folder]) == folder else None
    same = st is not None and (st.st_dev, st.st_ino) == (other.st_dev, other.st_ino)
    return "overwrite the input" if same and stat.S_ISREG(other.st_mode) else None


def write_text(text: str, output: str | None) -> None:
    """The report text to stdout (output None or '-') or to the path `output`, by what it is."""
    if not text.endswith("\n"):
        text += "\n"
    fd = 1 if output is None else _STREAMS.get(output)
    if fd is not None:
        stream = sys.stdout if fd == 1 else sys.stderr
        stream.write(text)
        stream.flush()
        return
    assert output is not None
    try:
        _write_path(text.encode("utf-8"), output)
    except OSError as exc:
        raise DoctorError(f"cannot write {output}: {_reason(exc)}") from None


def _write_path(data: bytes, output: str) -> None:
    try:
        st = os.stat(output)  # follows symlinks: what the path is, in the end
    except FileNotFoundError:
        st = None
    if st is None or stat.S_ISREG(st.st_mode):
        # realpath: a symlink stays a symlink; its target (existing or not) is what gets replaced.
        _replace_atomically(data, os.path.realpath(output), None if st is None else stat.S_IMODE(st.st_mode))
    elif stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "it is a directory; give a file name")
    elif stat.S_ISFIFO(st.st_mode):
        _write_fifo(data, output)  # also /dev/fd/N of a process substitution, a pipe that realpath cannot name
    elif stat.S_ISCHR(st.st_mode):
        _write_in_place(data, os.open(output, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC))
    else:
        raise OSError(errno.EINVAL, "it is neither a file, a character device nor a FIFO")


def _replace_atomically(data: bytes, target: str, mode: int | None) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".ddp-doctor-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        if mode is None:
            # mkstemp makes the file 0600; a new report is an ordinary file, so honour the umask.
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)  # an existing report keeps its mode
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_fifo(data: bytes, target: str) -> None:
    # O_NONBLOCK: with no reader, open() would wait forever; this way it fails at once (ENXIO).
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "it is a FIFO and no process has it open for reading") from None
        raise
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)  # the reader is there: ordinary writes from now on
    _write_in_place(data, fd)


def _write_in_place(data: bytes, fd: int) -> None:
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EPIPE:
        return "the reader closed it before the whole report was written"
    return exc.strerror or str(exc)
