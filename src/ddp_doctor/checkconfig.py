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

    def __post_init__(self) -> None:
        """A config that could not run is refused here, once, whoever built it (the flags' parser already
        bounds each flag; a config built in code gets the same words). ValueError: this layer knows no
        UsageError, commands/check.config_from_args turns it into one."""
        problems = [message for bad, message in self._limits() if bad]
        if problems:
            raise ValueError("; ".join(problems))

    def _limits(self) -> list[tuple[bool, str]]:
        return [
            (self.timeout <= 0, f"--timeout must be positive, got {_number(self.timeout)}"),
            (
                self.expect_gpus is not None and self.expect_gpus < 0,
                f"--expect-gpus must be 0 or more, got {self.expect_gpus}",
            ),
            (self.nproc is not None and self.nproc < 1, f"--nproc must be at least 1, got {self.nproc}"),
            (
                self.master_port is not None and not 0 < self.master_port < 65536,
                f"--master-port must be 1..65535, got {self.master_port}",
            ),
            (self.dataloader_workers < 0, f"--dataloader-workers must be 0 or more, got {self.dataloader_workers}"),
            (self.batch_mb <= 0, f"--batch-mb must be positive, got {_number(self.batch_mb)}"),
            (
                self.join_timeout is not None and self.join_timeout <= 0,
                f"--join-timeout must be positive, got {_number(self.join_timeout)}",
            ),
            (
                bool(self.engine_flags) and not self.image,
                f"unexpected arguments {' '.join(self.engine_flags)!r}: engine flags after '--' need --image",
            ),
        ]

    @property
    def multinode(self) -> bool:
        """Several nodes meet at a c10d rendezvous (torchrun --nnodes N / --rdzv-endpoint)."""
        return bool(self.nnodes and self.nnodes != "1") or bool(self.rdzv_endpoint)


def _number(value: float | None) -> str:
    """1.0 as 1, 0.5 as 0.5 (a refused value in the flag's own words); None where no value was given."""
    return "none" if value is None else f"{value:g}"
