"""`ddp-doctor check`'s settings as one frozen record.

commands/check.py builds it from the parsed flags once (`config_from_args`, as torch elastic's
config_from_args -> LaunchConfig); live.chain, live.multinode.node and image.container read it.
Nothing below commands/ sees argparse. It sits in the bottom layer because live/ and image/ both
read it and neither may import the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckConfig:
    static: bool = False
    """Only the checks that need no ranks."""
    expect_gpus: int | None = None
    """GPUs this node must show to torch; None: judged from NVML and the device nodes."""
    nproc: int | None = None
    """Ranks per node; None: visible GPUs with NCCL, else 2 CPU ranks with gloo."""
    oversubscribe: bool = False
    """Allow more ranks than GPUs (NCCL) or CPU cores (gloo); memory still bounds them."""
    backend: str | None = None
    timeout: float = 180.0
    """The whole run's deadline, seconds."""
    master_port: int | None = None
    dataloader_workers: int = 2
    batch_mb: float = 32.0
    gpu_health: bool = False
    keep_run_dir: bool = False
    nnodes: str | None = None
    """'N' or 'MIN:MAX'; None: one node (--standalone)."""
    node_rank: int | None = None
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    join_timeout: float | None = None
    image: str | None = None
    """Run the whole check inside this image."""
    engine: str | None = None
    engine_flags: tuple[str, ...] = ()
    """Flags for the engine's run command (given after '--'), without the '--'."""

    @property
    def multinode(self) -> bool:
        """Several nodes meet at a c10d rendezvous (torchrun --nnodes N / --rdzv-endpoint)."""
        return bool(self.nnodes and self.nnodes != "1") or bool(self.rdzv_endpoint)
