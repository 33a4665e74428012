"""ddp: a small real model trained with DDP and Adam; proven against a single process.

Each rank starts from different random weights, so DDP's initial broadcast is tested too.
Data and weights are drawn on the CPU from fixed seeds and then moved, so every device and
backend trains the same problem. The problem is well-conditioned at every world size: unit-variance
inputs and targets, and Adam (whose step size does not scale with the gradient) at a modest lr.
The first version used SGD (lr 0.05, momentum 0.9) on targets of variance ~11: it converged with
2 ranks (global batch 64) but diverged with 1 rank (batch 32), which is what one H200 ran.
At every step the DDP gradients are compared with those of one process that holds the same
weights and sees the concatenated global batch; the tolerance is |g - g_ref| <= ATOL + RTOL * |g_ref|
(fp32 accumulation in a different order is the only expected difference; TF32 is off).
After training the parameters must be bitwise identical on every rank.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from typing import Any, TypedDict

from ddp_doctor.live.phases import PhaseContext, check
from ddp_doctor.rundir.records import CheckRecord
from ddp_doctor.words import all_of, plural, ranks

ATOL = 1e-5
RTOL = 1e-4
LOCAL_BATCH = 32
IN, HIDDEN = 32, 128
LR = 3e-3
LOSS_RATIO = 0.9  # the mean of the last 3 losses must be below this share of the first


def _model(torch: Any, seed: int, device: Any) -> Any:
    # Built on the CPU from its own seed (the global RNG is restored afterwards), then moved.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(
            torch.nn.Linear(IN, HIDDEN),
            torch.nn.Tanh(),
            torch.nn.Linear(HIDDEN, HIDDEN),
            torch.nn.Tanh(),
            torch.nn.Linear(HIDDEN, 1),
        )
    return model.to(device)


def _optimizer(torch: Any, params: Any) -> Any:
    return torch.optim.Adam(params, lr=LR)


def _global_batch(torch: Any, step: int, world: int, device: Any, scale: float = 1.0) -> tuple[Any, Any]:
    """x ~ N(0, scale^2), y = x . w_true + noise with |w_true| = 1: Var(y) = scale^2 (scale: tests only)."""
    g = torch.Generator().manual_seed(10_000 + step)
    x = scale * torch.randn(world * LOCAL_BATCH, IN, generator=g)
    w_true = torch.linspace(-1, 1, IN)
    w_true = w_true / w_true.norm()
    y = (x @ w_true).unsqueeze(1) + 0.01 * torch.randn(world * LOCAL_BATCH, 1, generator=g)
    return x.to(device), y.to(device)


def loss_went_down(losses: list[float]) -> tuple[bool, float, float]:
    first, last = losses[0], sum(losses[-3:]) / min(3, len(losses))
    return last < LOSS_RATIO * first, first, last


class NvmlUse(TypedDict, total=False):
    """This rank's GPU while DDP trained, from NVML (the ranks' result files carry it)."""

    samples: int
    util_mean_pct: float
    util_max_pct: float
    mem_max_bytes: float
    error: str | None


class NvmlSampler(threading.Thread):
    """Utilisation and memory of this rank's GPU, sampled during the phase (NVML; no CUDA calls)."""

    def __init__(self, uuid: str | None, index: int):
        super().__init__(name="ddp-doctor-nvml", daemon=True)
        self.samples: list[tuple[float, float]] = []
        self.error: str | None = None
        self.stop = threading.Event()
        self.uuid, self.index = uuid, index

    def run(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                handle = self._handle(pynvml)
                while True:  # at least one sample, however short the phase
                    util = pynvml.nvmlDeviceGetUtilizationRates(handle)
                    mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                    self.samples.append((float(util.gpu), float(mem.used)))
                    if self.stop.wait(0.05):
                        break
            finally:
                pynvml.nvmlShutdown()
        except Exception as exc:  # noqa: BLE001 - NVML missing or refused: recorded, the phase goes on
            self.error = f"{type(exc).__name__}: {exc}"

    def _handle(self, pynvml: Any) -> Any:
        # torch prints the UUID bare; NVML wants "GPU-..." (or "MIG-..."). The CUDA index is not the
        # NVML index under CUDA_VISIBLE_DEVICES, so the index is only the last resort.
        if self.uuid:
            for candidate in (self.uuid, f"GPU-{self.uuid}", f"MIG-{self.uuid}"):
                try:
                    return pynvml.nvmlDeviceGetHandleByUUID(candidate)
                except pynvml.NVMLError:
                    continue
        return pynvml.nvmlDeviceGetHandleByIndex(self.index)

    def summary(self) -> NvmlUse:
        if not self.samples:
            return NvmlUse(samples=0, error=self.error)
        util = [u for u, _ in self.samples]
        return NvmlUse(
            samples=len(util),
            util_mean_pct=round(sum(util) / len(util), 1),
            util_max_pct=max(util),
            mem_max_bytes=max(m for _, m in self.samples),
            error=self.error,
        )


@dataclass(frozen=True)
class Training:
    """What the DDP steps measured on this rank."""

    losses: list[float]
    step_ms: list[float]
    worst: float
    """The largest gradient difference from the reference, over the allowed slack (plus ATOL)."""


def _start_sampler(ctx: PhaseContext) -> NvmlSampler | None:
    if ctx.device.type != "cuda" or not ctx.config.nvml:
        return None
    info = ctx.payload.get("device") or {}
    sampler = NvmlSampler(info.get("uuid") or None, ctx.device.index or 0)
    sampler.start()
    return sampler


def _train(torch: Any, ctx: PhaseContext, ddp: Any, reference: Any) -> Training:
    """ctx.config.steps steps of DDP, each step's gradients compared with the single-process reference."""
    dev, r, w = ctx.device, ctx.rank, ctx.world_size
    opt = _optimizer(torch, ddp.parameters())
    loss_fn = torch.nn.MSELoss()
    losses, step_ms = [], []
    worst = 0.0
    for step in range(ctx.config.steps):
        ctx.step(f"step:{step}")
        x, y = _global_batch(torch, step, w, dev)
        started = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x[r * LOCAL_BATCH : (r + 1) * LOCAL_BATCH]), y[r * LOCAL_BATCH : (r + 1) * LOCAL_BATCH])
        loss.backward()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        step_ms.append((time.perf_counter() - started) * 1000)
        # The reference: same weights, the whole global batch, one process, no communication.
        reference.load_state_dict(ddp.module.state_dict())
        reference.zero_grad(set_to_none=True)
        loss_fn(reference(x), y).backward()
        for p, q in zip(ddp.parameters(), reference.parameters()):
            excess = ((p.grad - q.grad).abs() - (ATOL + RTOL * q.grad.abs())).max().item()
            worst = max(worst, excess + ATOL)  # reported as the largest difference over the allowed slack
        opt.step()
        losses.append(loss.detach())
    return Training([float(v) for v in losses], step_ms, worst)


def _param_sync(torch: Any, ctx: PhaseContext, ddp: Any) -> tuple[list[int], str]:
    """The ranks whose parameters differ from rank 0's, and the sha256 of this rank's."""
    import torch.distributed as dist

    ctx.step("param_sync")
    flat = torch.cat([p.detach().reshape(-1) for p in ddp.parameters()]).float()
    gathered = [torch.empty_like(flat) for _ in range(ctx.world_size)]
    dist.all_gather(gathered, flat)
    differing = [s for s in range(ctx.world_size) if not torch.equal(gathered[s], gathered[0])]
    return differing, hashlib.sha256(str(flat.cpu().view(torch.int32).tolist()).encode()).hexdigest()


def run(ctx: PhaseContext) -> list[CheckRecord]:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = ctx.device
    sampler = _start_sampler(ctx)
    ddp = DDP(_model(torch, 1000 + ctx.rank, dev), device_ids=[dev.index] if dev.type == "cuda" else None)
    trained = _train(torch, ctx, ddp, _model(torch, 0, dev))
    if sampler:
        sampler.stop.set()
        sampler.join(timeout=2)
    differing, digest = _param_sync(torch, ctx, ddp)
    ctx.shared.step_ms = trained.step_ms
    ctx.shared.ddp = ddp
    ctx.payload["ddp"] = {
        "param_sha256": digest,
        "losses": [round(v, 6) for v in trained.losses],
        "step_ms": [round(v, 3) for v in trained.step_ms],
        "nvml": sampler.summary() if sampler else None,
    }
    w = ctx.world_size
    return [
        _param_sync_check(differing, digest, w, ctx.config.steps),
        _loss_check(trained.losses),
        _grad_check(trained.worst, w),
    ]


def _param_sync_check(differing: list[int], digest: str, world: int, steps: int) -> CheckRecord:
    return check(
        "live.ddp.param_sync",
        "fail" if differing else "pass",
        f"parameters differ from rank 0's on {ranks(differing)}"
        if differing
        else f"parameters bitwise identical on {all_of(world, 'rank')} after {plural(steps, 'step')}",
        observed={"param_sha256": digest},
        expected={"identical_on_all_ranks": True},
        cause="DDP did not keep the replicas in sync (a rank skipped a step or a gradient all_reduce)"
        if differing
        else None,
        remedy="look for ranks that run different code paths (unused parameters, data-dependent control flow)"
        if differing
        else None,
    )


def _loss_check(losses: list[float]) -> CheckRecord:
    down, first, last = loss_went_down(losses)
    return check(
        "live.ddp.loss",
        "pass" if down else "fail",
        f"loss {first:.4f} -> {last:.4f} over {plural(len(losses), 'step')}"
        + ("" if down else f", expected < {LOSS_RATIO:.0%} of the first"),
        metrics={"loss_first": round(first, 6), "loss_last": round(last, 6)},
        cause=None if down else "training did not make progress: gradients are wrong or not applied",
        remedy=None if down else "see live.ddp.grad_reference",
    )


def _grad_check(worst: float, world: int) -> CheckRecord:
    ok = worst <= ATOL
    return check(
        "live.ddp.grad_reference",
        "pass" if ok else "fail",
        f"DDP gradients match a single process on the global batch of {world * LOCAL_BATCH} "
        f"(worst {worst:.2e}, allowed {ATOL:g} + {RTOL:g}*|g|)"
        if ok
        else f"DDP gradients differ from the single-process reference by up to {worst:.2e} "
        f"(allowed {ATOL:g} + {RTOL:g}*|g|)",
        metrics={"grad_max_excess": worst},
        expected={"atol": ATOL, "rtol": RTOL},
        cause=None if ok else "the gradient all_reduce returns wrong averages",
        remedy=None if ok else "run the collectives phase in isolation; check NCCL/driver versions",
    )
