"""dataloader: worker processes hand batches to the rank through /dev/shm, as in real training.

Each batch is `--batch-mb` MB; with `--dataloader-workers` workers and the default prefetch
of 2, about workers x 2 batches per rank sit in /dev/shm at once, so a /dev/shm too small
for real training fails here for real (SIGBUS or "No space left on device").
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ddp_doctor.live.phases import PhaseContext, check
from ddp_doctor.rundir.records import CheckRecord
from ddp_doctor.words import plural

PREFETCH = 2
BATCH_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ShmSpace:
    """/dev/shm as this rank sees it when its workers start."""

    size_bytes: int | None = None
    free_bytes: int | None = None
    """Both None: /dev/shm could not be read."""

    @classmethod
    def here(cls) -> ShmSpace:
        try:
            st = os.statvfs("/dev/shm")
        except OSError:
            return cls()
        return cls(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)


def _batch_timeout(ctx: PhaseContext) -> float:
    """A synthetic batch takes milliseconds; when a worker cannot put one into a full /dev/shm,
    torch only logs the error in the worker and the rank would wait forever: bound that wait."""
    return max(2.0, min(BATCH_TIMEOUT_S, float(ctx.remaining()) - 2.0))


def _dataset(elements: int, batches: int) -> Any:
    """`batches` batches of `elements` float32s, batch i filled with i % 1000 (so a wrong one shows)."""
    import torch
    from torch.utils.data import Dataset, get_worker_info

    class Filled(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return int(batches)

        def __getitem__(self, i: int) -> Any:
            value = float(i % 1000)
            if get_worker_info() is None:
                return torch.full((elements,), value, dtype=torch.float32)
            # In a worker the batch is written straight into /dev/shm, as default_collate does in
            # training (torch/utils/data/_utils/collate.py, collate_tensor_fn: "concatenate directly
            # into a shared memory tensor to avoid an extra copy"); a full /dev/shm fails the same
            # write. A private tensor would be copied there once more by the queue (a third less CPU).
            shared = torch.UntypedStorage._new_shared(elements * 4)  # type: ignore[no-untyped-call]
            return torch.empty(0, dtype=torch.float32).set_(shared).view(elements).fill_(value)

    return Filled()


def _read_all(ctx: PhaseContext, loader: Any, elements: int) -> tuple[int, list[int]]:
    """Every batch read back: how many came, and which had wrong contents."""
    wrong = []
    seen = 0
    ctx.step("batch:0")
    for i, batch in enumerate(loader):
        ctx.step(f"batch:{i + 1}")
        if batch.numel() != elements or float(batch[0]) != float(i % 1000) or float(batch[-1]) != float(i % 1000):
            wrong.append(i)
        seen += 1
    return seen, wrong


def run(ctx: PhaseContext) -> list[CheckRecord]:
    from torch.utils.data import DataLoader

    prewarm = ctx.shared.prewarm
    if prewarm is not None:  # never fork workers while another thread holds an import lock
        ctx.step("prewarm")
        prewarm.join(timeout=ctx.remaining())
    workers = max(0, ctx.config.dataloader_workers)
    elements = max(1, int(ctx.config.batch_mb * (1 << 20) / 4))
    batches = max(2, workers * PREFETCH)
    dataset = _dataset(elements, batches)
    shm = ShmSpace.here()
    loader = DataLoader(
        dataset,
        batch_size=None,
        num_workers=workers,
        prefetch_factor=PREFETCH if workers else None,
        timeout=_batch_timeout(ctx) if workers else 0,
        persistent_workers=False,
    )
    started = time.perf_counter()
    seen, wrong = _read_all(ctx, loader, elements)
    seconds = time.perf_counter() - started
    total_mb = seen * elements * 4 / (1 << 20)
    observed = {
        "workers": workers,
        "batch_mb": round(elements * 4 / (1 << 20), 2),
        "batches": seen,
        "shm_size_bytes": shm.size_bytes,
        "shm_free_bytes": shm.free_bytes,
    }
    metrics = {
        "throughput_mbps": round(total_mb / seconds, 1) if seconds > 0 else 0.0,
        "in_flight_shm_bytes": workers * PREFETCH * elements * 4,
    }
    return [_batches_check(seen, wrong, batches, observed, metrics)]


def _batches_check(
    seen: int, wrong: list[int], batches: int, observed: Mapping[str, object], metrics: Mapping[str, float]
) -> CheckRecord:
    workers = observed["workers"]
    if wrong or seen != batches:
        return check(
            "live.dataloader.batches",
            "fail",
            f"{seen} of {plural(batches, 'batch', 'batches')} arrived, {len(wrong)} with wrong contents (first: {wrong[:3]})",
            observed=observed,
            expected={"batches": batches},
            metrics=metrics,
            cause="DataLoader workers returned corrupted or missing batches",
            remedy="check /dev/shm (size, noexec) and the multiprocessing sharing strategy",
        )
    return check(
        "live.dataloader.batches",
        "pass",
        f"{plural(seen, 'batch', 'batches')} of {observed['batch_mb']} MB from {workers} {'worker process' if workers == 1 else 'worker processes'} through /dev/shm, "
        f"{metrics['throughput_mbps']} MB/s",
        observed=observed,
        metrics=metrics,
    )
