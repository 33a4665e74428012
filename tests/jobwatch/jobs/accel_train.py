"""A small `accelerate launch` job for `ddp-doctor run` tests: Accelerator on CPU, one fault per mode.

modes: healthy | raise (rank --bad-rank raises at step 2)
"""

import argparse
import sys

import torch
from accelerate import Accelerator

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="healthy")
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--bad-rank", type=int, default=1)
args = parser.parse_args()

accelerator = Accelerator(cpu=True)
rank = accelerator.process_index
torch.manual_seed(0)
model = torch.nn.Linear(64, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = accelerator.prepare(model, opt)
for step in range(args.steps):
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    accelerator.backward(loss)
    opt.step()
    print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    if args.mode == "raise" and rank == args.bad_rank and step == 2:
        raise ValueError(f"bad batch at step {step} on rank {rank}")
accelerator.wait_for_everyone()
print(f"rank {rank} done", flush=True)
sys.exit(0)
