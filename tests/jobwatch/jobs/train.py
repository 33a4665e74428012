"""A small gloo training job for `ddp-doctor run` tests: real torchrun, real DDP, one fault per mode.

modes: healthy | raise | sigkill | hang | compile | straggler | forever | unused | set_device
"""

import argparse
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="healthy")
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--bad-rank", type=int, default=1)
parser.add_argument("--sleep", type=float, default=0.0)
parser.add_argument("--step-sleep", type=float, default=0.0, help="every rank, every step (a steady step rate)")
args = parser.parse_args()

if args.mode == "set_device" and int(os.environ["RANK"]) == args.bad_rank:
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # a CPU-only torch: fails in device setup

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)


class WithUnused(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = torch.nn.Linear(64, 8)
        self.unused = torch.nn.Linear(64, 8)  # outside the loss: DDP's reducer never gets its gradient

    def forward(self, x):
        return self.used(x)


model = DDP(WithUnused() if args.mode == "unused" else torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
bad = rank == args.bad_rank


def load_batch():
    if args.mode == "hang" and bad:
        while True:  # a data source that never yields: this rank never reaches the next collective
            time.sleep(0.5)
    return torch.randn(32, 64), torch.randn(32, 8)


def slow_compile():
    # A real compile: torch.compile traces and lowers a function; long enough (several seconds) on a CPU.
    fn = torch.compile(lambda x: (x.sin() * x.cos()).sum(dim=-1).softmax(-1), backend="inductor")
    return fn(torch.randn(256, 256))


if args.mode == "compile" and bad:
    slow_compile()
dist.barrier()

steps = 10**9 if args.mode == "forever" else args.steps
for step in range(steps):
    x, y = load_batch()
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    if args.mode == "raise" and bad and step == 2:
        raise ValueError(f"bad batch at step {step} on rank {rank}")
    if args.mode == "sigkill" and bad and step == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    if args.mode == "straggler" and bad:
        time.sleep(args.sleep or 0.3)
    if args.mode == "forever":
        time.sleep(0.2)
    time.sleep(args.step_sleep)
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
sys.exit(0)
