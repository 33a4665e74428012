"""A small `deepspeed` launcher job for `ddp-doctor run` tests: deepspeed.initialize on CPU (gloo).

modes: healthy | raise (rank --bad-rank raises at step 2). Needs DS_ACCELERATOR=cpu, and DeepSpeed builds
its shared-memory comm op (C++, g++ + ninja) on the first run into ~/.cache/torch_extensions.
"""

import argparse
import sys

import deepspeed
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--local_rank", type=int, default=-1)  # the deepspeed launcher passes it
parser.add_argument("--mode", default="healthy")
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--bad-rank", type=int, default=1)
args = parser.parse_args()

deepspeed.init_distributed(dist_backend="gloo")
torch.manual_seed(0)
model = torch.nn.Linear(64, 8)
config = {"train_batch_size": 64, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}
engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
rank = torch.distributed.get_rank()
for step in range(args.steps):
    loss = torch.nn.functional.mse_loss(engine(torch.randn(32, 64)), torch.randn(32, 8))
    engine.backward(loss)
    engine.step()
    print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    if args.mode == "raise" and rank == args.bad_rank and step == 2:
        raise ValueError(f"bad batch at step {step} on rank {rank}")
torch.distributed.barrier()
print(f"rank {rank} done", flush=True)
sys.exit(0)
