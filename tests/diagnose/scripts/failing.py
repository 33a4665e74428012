"""Small programs that fail the way real distributed jobs fail; run by the real torchrun in tests.

python failing.py shm         DataLoader workers pass 16 MB batches through /dev/shm
python failing.py sigkill     rank 1 is killed with SIGKILL after init (as the OOM killer does)
python failing.py worldsize   one plain process asks for world_size=2 (nobody else comes)
python failing.py init        init_process_group + barrier, then exit 0 (for launcher-level failures)
python failing.py hang        a few steps of all_reduce, then rank 1 stops calling collectives: rank 0 waits
                              inside all_reduce (gloo's timeout is an hour); the log just stops
python failing.py segv        rank 1 reads address 0 after a few steps (a native crash: SIGSEGV)
python failing.py doublefree  rank 1 frees one pointer twice: glibc aborts the process (SIGABRT)
"""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist


class Big(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.ones(4 << 20)  # 16 MB of float32 per sample


def shm() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    loader = torch.utils.data.DataLoader(Big(), batch_size=1, num_workers=2, prefetch_factor=4)
    for _ in loader:
        pass
    dist.destroy_process_group()


def sigkill() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    dist.barrier()
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()  # rank 0 waits here until torchrun ends it
    dist.destroy_process_group()


def worldsize() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=0, world_size=2, timeout=timedelta(seconds=3))


def init() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    dist.barrier()
    dist.destroy_process_group()


def _steps(n: int) -> None:
    for step in range(n):
        t = torch.ones(1024)
        dist.all_reduce(t)
        print(f"rank {dist.get_rank()}: step {step} loss {1.0 / (step + 1):.4f}", flush=True)


def hang() -> None:
    dist.init_process_group("gloo", timeout=timedelta(hours=1))
    _steps(3)
    if dist.get_rank() == 1:
        time.sleep(3600)  # stuck outside any collective (a deadlock, a stalled read): rank 0 waits in all_reduce
    _steps(1)
    dist.destroy_process_group()


def segv() -> None:
    import ctypes

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    _steps(2)
    if dist.get_rank() == 1:
        ctypes.string_at(0)  # read address 0: SIGSEGV in native code
    _steps(1)
    dist.destroy_process_group()


def doublefree() -> None:
    import ctypes

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    _steps(2)
    if dist.get_rank() == 1:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = [ctypes.c_void_p]
        ptr = libc.malloc(64)
        libc.free(ptr)
        libc.free(ptr)  # glibc detects the double free and calls abort()
    _steps(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    {
        "shm": shm,
        "sigkill": sigkill,
        "worldsize": worldsize,
        "init": init,
        "hang": hang,
        "segv": segv,
        "doublefree": doublefree,
    }[sys.argv[1]]()
