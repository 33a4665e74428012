"""Every Result id a report can hold, with its title: the public, grep-able names. (Lint rule ids and
failure signatures are declared in their own tables: deploy/lint/rules.yaml, diagnose/catalogue.yaml.)

tests/test_result_ids.py fails on an id written in the code that is not declared here, on a
declared id nothing produces, and on a title beside an id in the code that differs from this one.
"""

from __future__ import annotations

from types import MappingProxyType

DECLARED = MappingProxyType(
    {
        "bench.launch": "bench ranks ran to the end",
        "env.container": "container and GPU runtime",
        "env.dist_vars": "NCCL / torch.distributed variables (values)",
        "env.distributed": "torch.distributed and backends",
        "env.driver_cuda": "driver vs CUDA runtime",
        "env.env_vars": "distributed environment variables",
        "env.facts": "static facts",
        "env.gpu_arch": "GPU architecture in torch's kernels",
        "env.gpu_topology": "GPU peer-to-peer topology",
        "env.gpus": "GPUs (NVML)",
        "env.gpus.busy": "GPUs free of other work",
        "env.gpus.expected": "GPUs expected are visible",
        "env.nccl": "NCCL library",
        "env.network": "network interfaces and InfiniBand",
        "env.numpy": "numpy beside torch",
        "env.official_build": "official torch wheel",
        "env.python": "Python interpreter",
        "env.shm": "/dev/shm size",
        "env.torch.build": "torch build flavour",
        "env.torch.import": "torch imports",
        "env.torch.installed": "torch installed",
        "env.torchrun": "torchrun launcher",
        "env.ulimits": "ulimits (memlock, nofile)",
        "env.user": "user",
        "image.container": "Check inside the image",
        "image.cuda_runtime": "CUDA runtime",
        "image.cudnn": "cuDNN",
        "image.entrypoint": "Entrypoint and command",
        "image.env": "distributed environment variables",
        "image.integrity": "Image integrity",
        "image.nccl": "NCCL library",
        "image.official_build": "official torch wheel",
        "image.python": "Python interpreter",
        "image.run_command": "How to run it",
        "image.torch": "torch installed, then its build flavour",
        "image.torchrun": "torchrun launcher",
        "image.user": "user",
        "live.balance.gpu_util": "GPU utilisation during DDP, per rank",
        "live.balance.step_time": "DDP step time per rank",
        "live.balance.straggler": "no straggler rank",
        "live.collectives": "collectives give exact results",
        "live.collectives.all_gather": "all_gather exact",
        "live.collectives.all_reduce_avg": "all_reduce (avg) exact",
        "live.collectives.all_reduce_max": "all_reduce (max) exact",
        "live.collectives.all_reduce_sum": "all_reduce (sum) exact",
        "live.collectives.all_to_all": "all_to_all exact",
        "live.collectives.barrier": "barrier returns on every rank",
        "live.collectives.broadcast": "broadcast exact",
        "live.collectives.reduce_scatter": "reduce_scatter exact",
        "live.collectives.send_recv_ring": "send/recv around the ring exact",
        "live.dataloader.batches": "DataLoader batches arrive whole",
        "live.ddp.grad_reference": "DDP gradients match one process",
        "live.ddp.loss": "the loss goes down",
        "live.ddp.param_sync": "parameters identical on every rank",
        "live.exit": "torchrun exits 0",
        "live.gpu_health.run": "GPU micro-benchmarks ran",
        "live.init": "torchrun ranks join and init_process_group",
        "live.init.device": "each rank's device",
        "live.init.duplicate_gpu": "every rank has its own GPU",
        "live.init.env": "torchrun's rank variables agree",
        "live.init.join": "every rank joined",
        "live.init.process_group": "init_process_group returns",
        "live.launch": "torchrun starts the ranks",
        "live.nccl.transport": "NCCL transports",
        "live.run_dir": "run directory kept",
        "live.sampler.drop_last": "DistributedSampler with drop_last",
        "live.sampler.set_epoch": "set_epoch reshuffles",
        "live.sampler.shards": "DistributedSampler shards",
        "live.teardown": "ranks shut down cleanly",
        "live.timeout": "the chain finishes within --timeout",
        "multinode.bandwidth": "inter-node bandwidth",
        "multinode.clock_skew": "clocks agree across nodes",
        "multinode.interfaces": "interface and transport of each node",
        "multinode.joined": "nodes joined the rendezvous",
        "multinode.link_lost": "network path to every node",
        "multinode.peer_failed": "ranks on the other nodes",
        "multinode.probes": "cross-node probes",
        "multinode.ranks_reported": "every rank reported to node 0",
        "multinode.rdzv_endpoint": "c10d rendezvous endpoint",
        "multinode.socket_ifname": "socket interface for the process group",
        "multinode.versions": "same versions on every node",
        "run.balance.gpu": "GPU load",
        "run.balance.steps": "Step rate per rank",
        "run.balance.straggler": "Straggler rank",
        "run.cleanup": "Nothing left behind",
        "run.failure": "The job failed",
        "run.gather": "Every node's evidence",
        "run.hang": "The job hung",
        "run.job": "The job",
        "run.observability": "What the doctor added",
        "run.quiet": "Quiet, not hung",
        "live.dataloader": "DataLoader workers through /dev/shm",
        "live.sampler": "DistributedSampler shards",
        "live.ddp": "DDP training stays in sync",
        "live.balance": "every rank carries the same load",
    }
)

FAMILIES = MappingProxyType(
    {
        "bench.gpu": "GPU health in bench --gpu-health: bench.gpu.<metric>, bench.gpu.gpu<N>.error, bench.gpu.health",
        "live.gpu_health": "GPU health in check --gpu-health: live.gpu_health.<metric>, .gpu<N>.error, .health",
    }
)
"""Ids made at run time below a prefix the code writes (health/gpu.evaluate's `prefix`). The NCCL sweep's
bench.<op>.<dtype> (bench/results.result_id) and the phases' live.<phase> (live/merge.PHASE_TITLES) are
made from their own tables."""


def declared(rid: str) -> bool:
    return rid in DECLARED or any(rid == f or rid.startswith(f + ".") for f in FAMILIES)
