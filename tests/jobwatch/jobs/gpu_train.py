"""A one-rank NCCL job for gpu/run.sh: healthy (matmuls + all_reduce, steps printed), or stuck in a kernel.

modes: healthy | unused (DDP with a parameter outside the loss; gpu/run_failures.sh) | stuck (after a few healthy steps, a kernel that spins for ~10**13 cycles — hours — and a
torch.cuda.synchronize() that waits for it: the rank is stuck in CUDA work, not in a collective) |
stuck-allreduce (the same kernel with an all_reduce queued behind it: NCCL's communicator is live and its
RAS thread answers while the rank waits; gpu/run_ras.sh) |
stall-printing (after --stall-after-s of healthy steps, an all_reduce queued behind a kernel that never ends; the
rank keeps printing a line a second while it polls the collective: its output never stops, its collectives do;
gpu/run_hang.sh)
"""

import argparse
import os
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="healthy")
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--stall-after-s", type=float, default=40.0)
args = parser.parse_args()

local = int(os.environ.get("LOCAL_RANK", "0"))
torch.cuda.set_device(local)
dist.init_process_group("nccl", device_id=torch.device("cuda", local))
rank = dist.get_rank()
if args.mode == "unused":  # DDP over NCCL with a parameter outside the loss: the reducer raises at step 2
    from torch.nn.parallel import DistributedDataParallel as DDP

    class WithUnused(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.used = torch.nn.Linear(64, 8)
            self.unused = torch.nn.Linear(64, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.used(x)

    # Through DDP's own forward: calling ddp.module skips the reducer, and nothing would be raised.
    ddp = DDP(WithUnused().cuda(), device_ids=[local])
    for step in range(5):
        ddp(torch.randn(32, 64, device="cuda")).sum().backward()
        print(f"rank {rank} step {step}", flush=True)
a = torch.randn(4096, 4096, device="cuda")
times = []
started = time.time()
for step in range(10**9 if args.mode == "stall-printing" else args.steps):
    t0 = time.perf_counter()
    b = a @ a
    dist.all_reduce(b)
    torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
    if step % 25 == 0:
        print(f"rank {rank} step {step} norm {b.norm().item():.3e}", flush=True)
    if args.mode in ("stuck", "stuck-allreduce") and step == 10:
        print(f"rank {rank} step {step}: launching a kernel that never ends", flush=True)
        torch.cuda._sleep(10**13)
        if args.mode == "stuck-allreduce":
            dist.all_reduce(b)  # enqueued behind the endless kernel: a collective that never starts
        torch.cuda.synchronize()
    if args.mode == "stall-printing" and time.time() - started > args.stall_after_s:
        print(f"rank {rank} step {step}: an all_reduce queued behind a kernel that never ends", flush=True)
        torch.cuda._sleep(10**13)
        work = dist.all_reduce(b, async_op=True)
        while not work.is_completed():  # a progress line a second, as a logging thread or a progress bar would
            print(f"rank {rank} waiting for step {step} to finish", flush=True)
            time.sleep(1.0)
    if args.mode == "stall-printing":
        time.sleep(0.05)  # about 20 steps a second: a rhythm the doctor can learn
times.sort()
print(f"STEP_MS {1000 * times[len(times) // 2]:.4f}", flush=True)
dist.destroy_process_group()
