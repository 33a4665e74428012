"""What observability the job gets, as data: the environment to start it with and a line per item.

Nothing the user set is overridden: an item whose variable is already in the environment is
reported as the user's, not ours.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ddp_doctor.jobwatch.config import WatchConfig

HOOK_DIR = str(Path(__file__).resolve().parent / "hook")
FR_BUFFER_ENTRIES = "2000"  # PyTorch's docs suggest 2000: a few MB per rank, no measurable cost
STACK_SIGNAL = "SIGURG"
"""The hook's faulthandler listens on SIGURG: ignored by default, so a late or early one never kills a rank."""


@dataclass(frozen=True)
class Item:
    name: str
    state: str
    """added | user (already set by the user, kept) | off (switched off) | n/a."""
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "state": self.state, "detail": self.detail}


def is_python_launch(command: tuple[str, ...]) -> bool:
    """`python train.py` (one process, no RANK) rather than a launcher that sets RANK per worker."""
    exe = os.path.basename(command[0]) if command else ""
    if not exe.startswith("python"):
        return False
    rest = command[1:]
    for i, arg in enumerate(rest):
        if arg == "-m" and i + 1 < len(rest):
            return rest[i + 1] not in (
                "torch.distributed.run",
                "torch.distributed.launch",
                "accelerate.commands.launch",
            )
        if not arg.startswith("-"):
            return True
    return True


Add = Callable[[str, str, str, bool, str], None]
"""add(name, variable, value, enabled, why): set a variable the user did not set, and say so."""


def plan(cfg: WatchConfig, base: Mapping[str, str]) -> tuple[dict[str, str], list[Item]]:
    env = dict(base)
    items: list[Item] = []
    run_dir = str(cfg.run_dir)
    _plan_hook(cfg, base, env, items)

    def add(name: str, var: str, value: str, enabled: bool, why: str) -> None:
        if not enabled:
            items.append(Item(name, "off", f"{var} not set (switched off)"))
        elif var in base:
            items.append(Item(name, "user", f"{var}={base[var]} (yours, kept)"))
        else:
            env[var] = value
            items.append(Item(name, "added", f"{var}={value}: {why}"))

    if cfg.hook:
        env["DDP_DOCTOR_WATCH_ERROR_FILE"] = "1" if cfg.error_files else "0"
    add(
        "error files",
        "TORCHELASTIC_ERROR_FILE",
        f"{run_dir}/torchrun-error.json",
        cfg.error_files,
        "the launcher's root-cause error file; ranks write theirs from the hook's excepthook",
    )
    _plan_flight_recorder(cfg, base, add, items)
    if "NCCL_DEBUG" in base:
        items.append(Item("NCCL warnings", "user", f"NCCL_DEBUG={base['NCCL_DEBUG']} (yours, kept)"))
    else:
        add("NCCL warnings", "NCCL_DEBUG", "WARN", cfg.nccl_debug, "NCCL's warnings, one file per rank process")
        if cfg.nccl_debug and "NCCL_DEBUG_FILE" not in base:
            env["NCCL_DEBUG_FILE"] = f"{run_dir}/nccl.%h.%p.log"
    items.append(_ras_item(cfg, base))
    return env, items


def _plan_hook(cfg: WatchConfig, base: Mapping[str, str], env: dict[str, str], items: list[Item]) -> None:
    """The startup hook on the ranks' PYTHONPATH: output capture, heartbeats, stacks."""
    run_dir = str(cfg.run_dir)
    if not cfg.hook:
        items.append(
            Item("startup hook", "off", "--no-hook: no output capture, no faulthandler, stacks by py-spy only")
        )
        return
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([HOOK_DIR, *parts])
    env["DDP_DOCTOR_WATCH_DIR"] = run_dir
    if is_python_launch(cfg.command) and "RANK" not in base:
        env["DDP_DOCTOR_WATCH_LONE"] = "1"
    env["DDP_DOCTOR_WATCH_STACKS"] = "0" if cfg.stacks in ("off", "py-spy") else "1"
    env["DDP_DOCTOR_WATCH_FR"] = "1" if cfg.flight_recorder else "0"
    items.append(Item("output capture", "added", f"every rank's stdout/stderr also goes to {run_dir}/rank-N.log"))
    items.append(
        Item(
            "heartbeat",
            "added",
            f"every rank writes each process group's collective sequence number to {run_dir}/hb-rank-N.json "
            "when it moves (a counter torch keeps anyway, read four times a second by a thread of the hook)",
        )
    )
    items.append(
        Item(
            "stack hook",
            "added" if env["DDP_DOCTOR_WATCH_STACKS"] == "1" else "off",
            "a thread of the startup hook writes the main thread's stack when asked (no signal); faulthandler on "
            "SIGURG only for a rank whose thread cannot run (startup hook on PYTHONPATH, no change to the script)",
        )
    )


def _plan_flight_recorder(cfg: WatchConfig, base: Mapping[str, str], add: Add, items: list[Item]) -> None:
    # TORCH_FR_* are the names since torch 2.7 (TORCH_NCCL_TRACE_* print a deprecation warning into the job's
    # output there); a user's setting under either name is kept.
    fr_user = [v for v in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE") if v in base]
    if fr_user and cfg.flight_recorder:
        items.append(Item("flight recorder", "user", f"{fr_user[0]}={base[fr_user[0]]} (yours, kept)"))
    else:
        add(
            "flight recorder",
            "TORCH_FR_BUFFER_SIZE",
            FR_BUFFER_ENTRIES,
            cfg.flight_recorder,
            "collectives recorded per rank (torch's own default since 2.6, pytorch#142260: no change there; "
            "older torch records only with it)",
        )
    if not cfg.flight_recorder:
        return
    add("flight recorder dump on timeout", "TORCH_NCCL_DUMP_ON_TIMEOUT", "1", True, "dump when the watchdog fires")
    if "TORCH_NCCL_DEBUG_INFO_TEMP_FILE" in base:
        items.append(Item("flight recorder dump files", "user", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE (yours, kept)"))
    else:
        add(
            "flight recorder dump files",
            "TORCH_FR_DUMP_TEMP_FILE",
            f"{cfg.run_dir}/fr-timeout-rank-",
            True,
            "dumps land in the run directory",
        )


def _ras_item(cfg: WatchConfig, base: Mapping[str, str]) -> Item:
    # RAS is NCCL's own (on by default since 2.24); the doctor changes no variable, it only asks on a hang.
    ras_addr = base.get("NCCL_RAS_ADDR", "localhost:28028")
    if not cfg.ras:
        return Item("NCCL RAS query", "off", "--no-ras: RAS not asked on a hang")
    if base.get("NCCL_RAS_ENABLE", "").strip() == "0":
        return Item("NCCL RAS query", "user", "NCCL_RAS_ENABLE=0 (yours, kept): no RAS to ask")
    return Item("NCCL RAS query", "added", f"on a hang, NCCL's RAS at {ras_addr} is asked for dead or missing peers")


def describe(command: tuple[str, ...]) -> str:
    return shlex.join(command)
