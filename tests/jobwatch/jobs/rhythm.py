"""A gloo DDP job with a steady step time that hangs at a known step, or has one long healthy quiet phase.

For benchmarks/bench_hang_time.py and tests/jobwatch/test_hang_rhythm.py. The moment of the hang is written
to --marker (epoch seconds) by the rank that causes it, so the time from the hang to the doctor's verdict is
measured, not guessed.

--hang leave:     rank --bad-rank leaves the training loop at --hang-at and waits for a file that never comes
--hang leave-printing: the same, printing a line every 0.5 s while it waits (its output never stops)
--hang mismatch:  rank --bad-rank calls all_gather where the others' DDP step all-reduces its gradients
--hang mismatch-dtype / mismatch-size: the same all_reduce with another dtype / another size (these may crash
                  gloo at once instead of hanging; the doctor then reports the failure)
--quiet checkpoint: rank 0 saves a checkpoint to a slow file object for --quiet-s at --quiet-at
--quiet compile:    every rank torch.compiles a larger model (--compile-blocks 16, forward and backward, inductor's
                    caches off) at --quiet-at and runs it once
--quiet eval:       every rank evaluates for --quiet-s at --quiet-at: forward passes, no collective
--quiet first-batch: the first batch comes from a DataLoader worker that takes --quiet-s
"""

import argparse
import os
import time

# A compile that really compiles each run: inductor's on-disk caches would make a second run near free.
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--step-s", type=float, default=0.05)
parser.add_argument("--hang", default="none")
parser.add_argument("--hang-at", type=int, default=20)
parser.add_argument("--bad-rank", type=int, default=1)
parser.add_argument("--quiet", default="none")
parser.add_argument("--quiet-at", type=int, default=15)
parser.add_argument("--quiet-s", type=float, default=40.0)
parser.add_argument("--compile-blocks", type=int, default=16)
parser.add_argument("--marker", default="")
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(64, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
bucket = sum(p.numel() for p in model.parameters())


def mark() -> None:
    if args.marker:
        with open(args.marker + ".tmp", "w") as f:
            f.write(repr(time.time()))
        os.replace(args.marker + ".tmp", args.marker)


class SlowDataset(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 1

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(args.quiet_s)  # a shard downloaded, a cache filled: the first batch only
        return torch.randn(32, 64)


def first_batch() -> torch.Tensor:
    loader = torch.utils.data.DataLoader(SlowDataset(), batch_size=None, num_workers=1)
    return next(iter(loader))


class SlowFile:
    """A file on a slow network filesystem: torch.save's writes take --quiet-s in all."""

    def __init__(self, path: str, total: int) -> None:
        self.f = open(path, "wb")  # noqa: SIM115
        self.start, self.total, self.written = time.time(), max(total, 1), 0

    def write(self, data: bytes) -> int:
        self.written += len(data)
        time.sleep(max(0.0, self.start + args.quiet_s * min(1.0, self.written / self.total) - time.time()))
        return self.f.write(data)

    def flush(self) -> None:
        self.f.flush()


def checkpoint() -> None:
    state = {"model": model.state_dict(), "extra": torch.randn(256, 1024)}
    out = SlowFile(os.path.join(os.path.dirname(args.marker or "."), f"ckpt-{rank}.pt"), 256 * 1024 * 4)
    torch.save(state, out)
    out.f.close()


def compile_larger() -> None:
    layers = []
    for i in range(args.compile_blocks):
        layers += [torch.nn.Linear(256, 256), torch.nn.LayerNorm(256), torch.nn.GELU() if i % 2 else torch.nn.SiLU()]
    big = torch.compile(torch.nn.Sequential(*layers))
    big(torch.randn(16, 256)).sum().backward()


def evaluate() -> None:
    # Forward passes only, no collective; each about half compute, half waiting on the next batch.
    until = time.time() + args.quiet_s
    w = torch.randn(512, 512)
    with torch.no_grad():
        while time.time() < until:
            x = torch.randn(256, 512)
            for _ in range(20):
                x = torch.tanh(x @ w)
            time.sleep(0.02)
    print(f"rank {rank} eval done", flush=True)


def mismatch(kind: str) -> None:
    mark()
    if kind == "mismatch":
        out = [torch.zeros(bucket) for _ in range(dist.get_world_size())]
        dist.all_gather(out, torch.zeros(bucket))
    elif kind == "mismatch-dtype":
        dist.all_reduce(torch.zeros(bucket, dtype=torch.float64))
    else:
        dist.all_reduce(torch.zeros(bucket * 2))


dist.barrier()
for step in range(args.steps):
    t0 = time.time()
    if args.hang.startswith("leave") and rank == args.bad_rank and step == args.hang_at:
        mark()
        while not os.path.exists("/nonexistent/ddp-doctor-never"):  # a peer's file that never comes
            if args.hang == "leave-printing":
                print(f"rank {rank} waiting for the peer's file", flush=True)
            time.sleep(0.5 if args.hang == "leave-printing" else 0.2)
    if args.hang.startswith("mismatch") and rank == args.bad_rank and step == args.hang_at:
        mismatch(args.hang)
    x = first_batch() if args.quiet == "first-batch" and step == 0 else torch.randn(32, 64)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    if step == args.quiet_at:
        if args.quiet == "checkpoint" and rank == 0:
            checkpoint()
        elif args.quiet == "compile":
            compile_larger()
        elif args.quiet == "eval":
            evaluate()
    time.sleep(max(0.0, args.step_s - (time.time() - t0)))
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
