"""init: env consistency, device, every rank joined, no two ranks on one GPU, init_process_group."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from typing import Any, TypedDict, cast

from ddp_doctor.live.phases import PeerError, PhaseContext, PhaseError, check
from ddp_doctor.rundir.records import CheckRecord
from ddp_doctor.words import plural


def _torch_facts() -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    nccl_version = None
    try:
        if torch.cuda.is_available() or torch.version.cuda:
            v = torch.cuda.nccl.version()  # type: ignore[no-untyped-call]
            nccl_version = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001 - a CUDA build whose NCCL cannot load: recorded as unknown
        nccl_version = None
    hip = getattr(torch.version, "hip", None)
    return {
        "installed": True,
        "importable": True,
        "import_error": None,
        "version": torch.__version__,
        "location": os.path.dirname(torch.__file__),
        "cuda": torch.version.cuda,
        "hip": hip,
        "cudnn": (
            torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
            if torch.backends.cudnn.is_available()  # type: ignore[no-untyped-call]
            else None
        ),
        "flavour": "rocm" if hip else ("cuda" if torch.version.cuda else "cpu"),
        "arch_list": torch.cuda.get_arch_list() if torch.version.cuda or hip else [],
        "distributed": dist.is_available(),
        "backends": {
            "nccl": dist.is_nccl_available(),
            "gloo": dist.is_gloo_available(),
            "mpi": dist.is_mpi_available(),
        },
        "nccl_version": nccl_version,
        "numpy": _numpy_version(),
        "cuda_available": torch.cuda.is_available(),
        "device_count": torch.cuda.device_count() if torch.version.cuda or hip else 0,
    }


def _numpy_version() -> str | None:
    try:
        import numpy
    except ImportError:
        return None
    return str(numpy.__version__)


def _env_check(ctx: PhaseContext) -> CheckRecord:
    env = {
        k: os.environ.get(k)
        for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    problems = []
    if not 0 <= ctx.rank < ctx.world_size:
        problems.append(f"RANK={ctx.rank} is outside 0..WORLD_SIZE-1 ({ctx.world_size})")
    if not 0 <= ctx.local_rank < ctx.local_world_size:
        problems.append(f"LOCAL_RANK={ctx.local_rank} is outside 0..LOCAL_WORLD_SIZE-1 ({ctx.local_world_size})")
    expected = ctx.config.expected_world_size
    if expected and expected != ctx.world_size:
        problems.append(f"WORLD_SIZE={ctx.world_size}, expected {expected}")
    if problems:
        return check(
            "live.init.env",
            "fail",
            "; ".join(problems),
            observed=env,
            cause="torchrun's rank variables are inconsistent (something overrides RANK/WORLD_SIZE in the environment?)",
            remedy="do not set RANK, LOCAL_RANK or WORLD_SIZE yourself; let torchrun set them",
        )
    return check(
        "live.init.env",
        "pass",
        f"RANK, LOCAL_RANK, WORLD_SIZE ({ctx.world_size}) and LOCAL_WORLD_SIZE ({ctx.local_world_size}) consistent",
        observed=env,
    )


class DeviceInfo(TypedDict, total=False):
    """The device a rank runs on (its result file's "device"; the other ranks see it through the store)."""

    type: str
    index: int
    name: str
    uuid: str
    pci_bus_id: str
    memory_bytes: int
    compute_capability: str


class JoinRecord(TypedDict):
    """What each rank writes into the rendezvous store on joining."""

    rank: int
    node: str
    pid: int
    device: DeviceInfo


def _device(ctx: PhaseContext) -> tuple[DeviceInfo, CheckRecord]:
    import torch

    if ctx.backend != "nccl":
        ctx.device = torch.device("cpu")
        return DeviceInfo(type="cpu"), check("live.init.device", "pass", "CPU rank (gloo)")
    if not torch.cuda.is_available():
        raise PhaseError(
            f"backend nccl needs CUDA, but torch.cuda.is_available() is False on rank {ctx.rank} "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}, torch {torch.__version__}, "
            f"built for CUDA {torch.version.cuda})",
            cause="this rank sees no usable GPU: a CPU-only torch, CUDA_VISIBLE_DEVICES hiding the GPUs, "
            "or a container started without the NVIDIA runtime",
            remedy="docker run --gpus all ... (Kubernetes: resources.limits nvidia.com/gpu and "
            "runtimeClassName: nvidia); check CUDA_VISIBLE_DEVICES; or run on CPU with --backend gloo",
        )
    count = torch.cuda.device_count()
    if ctx.local_rank >= count:
        raise PhaseError(
            f"rank {ctx.rank} has LOCAL_RANK {ctx.local_rank} but only {plural(count, 'GPU')} "
            f"{'is' if count == 1 else 'are'} visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); run at most {plural(count, 'rank')} "
            f"per node (--nproc {count}) or make more GPUs visible",
            cause=f"more ranks per node ({ctx.local_world_size}) than visible GPUs ({count}): "
            "torch.cuda.set_device(LOCAL_RANK) would fail with 'invalid device ordinal', "
            "or two ranks would share a GPU",
            remedy=f"torchrun --nproc-per-node {count} (ddp-doctor check --nproc {count}); Kubernetes: "
            "nvidia.com/gpu limit = nprocPerNode; Slurm: --gpus-per-node = --nproc-per-node",
        )
    torch.cuda.set_device(ctx.local_rank)
    ctx.device = torch.device("cuda", ctx.local_rank)
    props = torch.cuda.get_device_properties(ctx.local_rank)
    info = DeviceInfo(
        type="cuda",
        index=ctx.local_rank,
        name=props.name,
        uuid=str(getattr(props, "uuid", "") or ""),
        pci_bus_id=f"{getattr(props, 'pci_domain_id', 0):04x}:{getattr(props, 'pci_bus_id', 0):02x}:"
        f"{getattr(props, 'pci_device_id', 0):02x}",
        memory_bytes=props.total_memory,
        compute_capability=f"{props.major}.{props.minor}",
    )
    return info, check(
        "live.init.device", "pass", f"each rank on its own cuda:LOCAL_RANK ({props.name})", observed=info
    )


def _store(ctx: PhaseContext, timeout_s: float) -> Any:
    import torch.distributed as dist

    # The rendezvous store torchrun hosts for this worker group (TORCHELASTIC_USE_AGENT_STORE).
    store: Any = dist.TCPStore  # type: ignore[attr-defined]
    return store(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        is_master=False,
        timeout=timedelta(seconds=timeout_s),
        wait_for_workers=False,
    )


def _join(ctx: PhaseContext, device: DeviceInfo) -> tuple[dict[int, JoinRecord], CheckRecord]:
    """Count the ranks that reached init through the store, with a deadline, before any collective."""
    ctx.step("join")
    prefix = (
        f"ddp_doctor/{os.environ.get('TORCHELASTIC_RUN_ID', 'run')}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    )
    deadline = ctx.phase_deadline - 1.0
    store = _store(ctx, max(1.0, deadline - time.time()))
    me = JoinRecord(rank=ctx.rank, node=ctx.node, pid=os.getpid(), device=device)
    store.set(f"{prefix}/rank/{ctx.rank}", json.dumps(me))
    joined = store.add(f"{prefix}/joined", 1)
    started = time.time()
    # The last rank to join says so; the others block on that key (the store wakes them at once and
    # releases the GIL meanwhile, so the rank's prewarm thread runs) instead of polling the count.
    everyone = f"{prefix}/everyone"
    if joined >= ctx.world_size:
        store.set(everyone, "1")
    else:
        try:
            store.wait([everyone], timedelta(seconds=max(0.001, deadline - time.time())))
        except RuntimeError:  # the store's timeout (DistStoreError): counted and named below
            pass
        joined = store.add(f"{prefix}/joined", 0)
    keys = [f"{prefix}/rank/{r}" for r in range(ctx.world_size)]
    present = [r for r, k in enumerate(keys) if store.check([k])]
    if joined < ctx.world_size:
        missing = [r for r in range(ctx.world_size) if r not in present]
        raise PeerError(
            f"{len(present)} of {plural(ctx.world_size, 'rank')} joined within {time.time() - started:.1f} s; "
            f"missing: {', '.join(f'rank {r}' for r in missing)}",
            missing,
        )
    infos = {r: cast(JoinRecord, json.loads(store.get(k))) for r, k in enumerate(keys)}  # what each wrote above
    del store
    return infos, check(
        "live.init.join",
        "pass",
        f"{ctx.world_size} of {plural(ctx.world_size, 'rank')} joined",
        metrics={"join_s": round(time.time() - started, 3)},
    )


def _duplicates(infos: dict[int, JoinRecord]) -> CheckRecord:
    by_gpu: dict[tuple[str, Any], list[int]] = {}
    for r, info in infos.items():
        dev = info.get("device") or DeviceInfo()
        if dev.get("type") == "cuda":
            by_gpu.setdefault((str(info.get("node")), dev.get("uuid") or dev.get("pci_bus_id")), []).append(r)
    shared = {f"{node}/{gpu}": ranks for (node, gpu), ranks in by_gpu.items() if len(ranks) > 1}
    if shared:
        text = "; ".join(f"ranks {', '.join(map(str, r))} share GPU {g}" for g, r in shared.items())
        return check(
            "live.init.duplicate_gpu",
            "fail",
            text,
            observed={"shared": shared},
            expected={"one_rank_per_gpu": True},
            cause="two ranks were mapped to the same GPU; NCCL would fail with 'Duplicate GPU detected'",
            remedy="run one rank per GPU: --nproc equal to the GPU count, and do not set CUDA_VISIBLE_DEVICES "
            "per rank to the same device",
        )
    return check("live.init.duplicate_gpu", "pass", "every rank has its own GPU" if by_gpu else "no GPUs (CPU ranks)")


def run(ctx: PhaseContext) -> list[CheckRecord]:
    import torch.distributed as dist

    ctx.step("facts")
    ctx.payload["torch"] = _torch_facts()
    checks = [_env_check(ctx)]
    if checks[0].failed:
        raise RuntimeError(checks[0].summary)
    device, dev_check = _device(ctx)
    ctx.payload["device"] = device
    checks.append(dev_check)
    infos, join_check = _join(ctx, device)
    checks.append(join_check)
    dup = _duplicates(infos)
    checks.append(dup)
    if dup.failed:
        raise RuntimeError(dup.summary + " (caught before NCCL's 'Duplicate GPU detected')")
    ctx.step("init_process_group")
    timeout = timedelta(seconds=max(5.0, ctx.deadline - time.time()))
    started = time.time()
    if ctx.backend == "nccl":  # bound to its device: NCCL sets up the communicator now, not at the first collective
        dist.init_process_group(ctx.backend, timeout=timeout, device_id=ctx.device)
    else:
        dist.init_process_group(ctx.backend, timeout=timeout)
    checks.append(
        check(
            "live.init.process_group",
            "pass",
            f"init_process_group({ctx.backend}) with world size {dist.get_world_size()}",
            metrics={"init_s": round(time.time() - started, 3)},
        )
    )
    return checks
