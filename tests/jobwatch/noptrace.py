"""Run a command where the kernel refuses ptrace: `python noptrace.py COMMAND...`.

It installs a seccomp filter (inherited by every child, kept across exec) that makes ptrace(2),
process_vm_readv(2) and process_vm_writev(2) fail with EPERM, then execs COMMAND. That is what a
container without CAP_SYS_PTRACE gets from Docker's default seccomp profile on kernels before 4.8
(and from podman/Kubernetes profiles that drop the calls): py-spy cannot read another process's
memory there. Only the standard library (ctypes + prctl), x86_64 and aarch64.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K
# (audit arch, syscall numbers of ptrace, process_vm_readv, process_vm_writev) from the kernel's unistd tables.
ARCHES = {"x86_64": (0xC000003E, (101, 310, 311)), "aarch64": (0xC00000B7, (117, 270, 271))}


def _filter() -> bytes:
    arch, calls = ARCHES[platform.machine()]
    n = len(calls)
    prog = [
        (BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (BPF_JEQ_K, 0, n + 1, arch),  # another ABI: allow (jump to ALLOW)
        (BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    for i, nr in enumerate(calls):
        prog.append((BPF_JEQ_K, n - i, 0, nr))  # to the ERRNO return after the ALLOW
    prog.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    prog.append((BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM))
    return b"".join(struct.pack("HBBI", *ins) for ins in prog)


def deny_ptrace() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    code = _filter()
    buf = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(code) // 8, ctypes.addressof(buf))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: noptrace.py COMMAND [ARG...]")
    deny_ptrace()
    os.execvp(sys.argv[1], sys.argv[1:])
