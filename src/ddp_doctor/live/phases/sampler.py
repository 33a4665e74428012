"""sampler: DistributedSampler shards are disjoint, cover the dataset, reshuffle with set_epoch."""

from __future__ import annotations

from typing import Any

from ddp_doctor.live.phases import PhaseContext, all_gather_objects, check
from ddp_doctor.rundir.records import CheckRecord
from ddp_doctor.words import plural

DATASET_LEN = 1003  # not a multiple of common world sizes, so padding and drop_last matter


def _shards(ctx: PhaseContext, epoch: int, drop_last: bool) -> list[list[int]]:
    from torch.utils.data.distributed import DistributedSampler

    dataset: Any = range(DATASET_LEN)  # a Sequence is all DistributedSampler needs
    sampler: DistributedSampler[int] = DistributedSampler(
        dataset, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=True, seed=1234, drop_last=drop_last
    )
    sampler.set_epoch(epoch)
    mine = list(sampler)
    if len(mine) != len(sampler):
        raise RuntimeError(f"DistributedSampler yielded {len(mine)} indices but len() says {len(sampler)}")
    return all_gather_objects(ctx, mine)


def _verify(shards: list[list[int]], world: int, drop_last: bool) -> list[str]:
    n = DATASET_LEN
    per_rank = n // world if drop_last else -(-n // world)
    problems = []
    if any(len(s) != per_rank for s in shards):
        problems.append(f"shard sizes {[len(s) for s in shards]}, expected {per_rank} each")
    flat = [i for s in shards for i in s]
    distinct = set(flat)
    if drop_last:
        if len(distinct) != len(flat):
            problems.append(f"{len(flat) - len(distinct)} indices appear on more than one rank")
    else:
        padding = per_rank * world - n
        if distinct != set(range(n)):
            problems.append(f"the shards cover {len(distinct)} of {n} samples")
        if len(flat) - len(distinct) != padding:
            problems.append(f"{len(flat) - len(distinct)} repeated indices, expected exactly the {padding} of padding")
    return problems


def _shards_text(world: int, per_rank: int, padding: int) -> str:
    """'2 disjoint shards of 502 samples (1 of them padding) cover all 1003'"""
    pad = "no padding" if padding == 0 else f"{plural(padding, 'sample')} of padding, repeated from the start"
    return f"{plural(world, 'disjoint shard')} of {plural(per_rank, 'sample')} ({pad}) {'covers' if world == 1 else 'cover'} all {DATASET_LEN}"


def run(ctx: PhaseContext) -> list[CheckRecord]:
    checks = []
    world = ctx.world_size
    ctx.step("epoch0")
    epoch0 = _shards(ctx, 0, drop_last=False)
    problems = _verify(epoch0, world, drop_last=False)
    padding = -(-DATASET_LEN // world) * world - DATASET_LEN
    checks.append(
        check(
            "live.sampler.shards",
            "fail" if problems else "pass",
            "; ".join(problems) if problems else _shards_text(world, len(epoch0[0]), padding),
            observed={"shard_sizes": [len(s) for s in epoch0]},
            expected={"dataset_len": DATASET_LEN},
            cause="DistributedSampler is not sharding consistently: ranks see different seeds or lengths"
            if problems
            else None,
            remedy="give every rank the same dataset and DistributedSampler(seed=...)" if problems else None,
        )
    )
    ctx.step("epoch1")
    epoch1 = _shards(ctx, 1, drop_last=False)
    problems = _verify(epoch1, world, drop_last=False)
    if epoch1 == epoch0:
        problems.append("set_epoch(1) produced the same order as epoch 0")
    checks.append(
        check(
            "live.sampler.set_epoch",
            "fail" if problems else "pass",
            "; ".join(problems) if problems else "set_epoch(1) reshuffles and the shards stay disjoint",
            cause="the sampler does not reshuffle between epochs" if problems else None,
            remedy="call sampler.set_epoch(epoch) at the start of every epoch" if problems else None,
        )
    )
    ctx.step("drop_last")
    dropped = _shards(ctx, 0, drop_last=True)
    problems = _verify(dropped, world, drop_last=True)
    checks.append(
        check(
            "live.sampler.drop_last",
            "fail" if problems else "pass",
            "; ".join(problems)
            if problems
            else f"drop_last=True: {world} disjoint shards of {DATASET_LEN // world}, {DATASET_LEN % world} dropped",
            observed={"shard_sizes": [len(s) for s in dropped]},
        )
    )
    return checks
