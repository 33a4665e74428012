"""The one builder of a torchrun command line: a typed record in, an argv list out.

The live chain's launcher (live/launch.py, which bench and the multi-node check start their ranks
through), the configs `launch` generates (deploy/spec.py; `check --image` runs `ddp-doctor check`,
which launches through the live chain) and the run command `image` advises (checks/units/run_command.py)
all build theirs here, so the flags and their order are written once. Pure: no I/O, nothing found on
PATH (the caller chooses `launcher`). In the bottom layer so that checks, live, bench, deploy and image
may all import it.

    argv(TorchrunCommand("train.py", nproc="8", nnodes="2", rdzv_endpoint="node0:29500", rdzv_id="job1"))
    == ["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "--rdzv-backend", "c10d",
        "--rdzv-endpoint", "node0:29500", "--rdzv-id", "job1", "train.py"]
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TorchrunCommand:
    target: str
    """The script each rank runs, or the module with `module=True` (`-m`)."""
    target_args: tuple[str, ...] = ()
    """Arguments after the script or module."""
    module: bool = False
    nproc: str = "1"
    """`--nproc-per-node`: a count, or torchrun's `gpu` / `cpu` / `auto`."""
    nnodes: str = "1"
    """`N` or `MIN:MAX` (elastic)."""
    rdzv_endpoint: str | None = None
    """HOST:PORT of the c10d rendezvous; None: `--standalone` (one node, a free port of its own)."""
    rdzv_id: str | None = None
    join_timeout_s: float | None = None
    """How long the rendezvous waits for every node (`--rdzv-conf join_timeout=`); whole seconds, at least 1."""
    max_restarts: int | None = None
    monitor_interval_s: float | None = None
    log_dir: str | None = None
    """torchrun's own log directory (it otherwise makes /tmp/torchelastic_* and leaves it)."""
    launcher: tuple[str, ...] = ("torchrun",)
    """How torchrun itself is started: `torchrun`, a path, or `python -m torch.distributed.run`."""

    def __post_init__(self) -> None:
        if self.rdzv_endpoint is None and self.nnodes != "1":
            raise ValueError(f"--nnodes {self.nnodes} needs a rendezvous endpoint; --standalone is one node")


def argv(cmd: TorchrunCommand) -> list[str]:
    """The command line; each given value is kept as the same object (deploy's shell-expanded words)."""
    out = [*cmd.launcher]
    if cmd.rdzv_endpoint is None:
        out.append("--standalone")
    out += ["--nnodes", cmd.nnodes, "--nproc-per-node", cmd.nproc]
    if cmd.rdzv_endpoint is not None:
        out += ["--rdzv-backend", "c10d", "--rdzv-endpoint", cmd.rdzv_endpoint]
        if cmd.rdzv_id is not None:
            out += ["--rdzv-id", cmd.rdzv_id]
        if cmd.join_timeout_s is not None:
            out += ["--rdzv-conf", f"join_timeout={int(max(1, cmd.join_timeout_s))}"]
    if cmd.max_restarts is not None:
        out += ["--max-restarts", str(cmd.max_restarts)]
    if cmd.monitor_interval_s is not None:
        out += ["--monitor-interval", str(cmd.monitor_interval_s)]
    if cmd.log_dir is not None:
        out += ["--log-dir", cmd.log_dir]
    if cmd.module:
        out.append("-m")
    return [*out, cmd.target, *cmd.target_args]
