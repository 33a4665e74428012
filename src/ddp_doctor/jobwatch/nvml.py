"""A per-GPU timeline sampled through NVML in a thread (utilisation, memory, power), saved as JSON lines.

NVML reads counters the driver keeps anyway; one sample of a GPU costs microseconds and touches
no CUDA context, so the job never sees it. Without NVML (no driver, CPU machine) it says why.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, TypedDict


class NvmlSample(TypedDict, total=False):
    """One GPU at one moment: a line of the run directory's NVML timeline and of facts["run"]["gpu"]."""

    t: float
    """Seconds since the timeline started."""
    gpu: int
    util_pct: float
    mem_used_mib: float
    power_w: float
    error: str
    """What NVML raised for this GPU (one that fell off the bus)."""


class GpuName(TypedDict):
    index: int
    name: str


class Timeline:
    def __init__(self, path: Path, hz: float) -> None:
        self.path = path
        self.hz = hz
        self.samples: list[NvmlSample] = []
        self.devices: list[GpuName] = []
        self.note: str | None = None
        """Why there is no timeline, when there is none."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.t0 = time.time()

    def start(self) -> None:
        if self.hz <= 0:
            self.note = "NVML timeline switched off (--sample-hz 0)"
            return
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - no driver, no library: said in the report
            self.note = f"no NVML here ({type(exc).__name__}: {exc}); no GPU timeline"
            return
        handles = []
        try:
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(h)
                self.devices.append(GpuName(index=i, name=name.decode() if isinstance(name, bytes) else str(name)))
                handles.append(h)
        except Exception as exc:  # noqa: BLE001
            self.note = f"NVML lists no GPU ({exc})"
            return
        if not handles:
            self.note = "NVML found no GPU; no GPU timeline"
            return
        self._thread = threading.Thread(target=self._run, args=(pynvml, handles), name="nvml-timeline", daemon=True)
        self._thread.start()

    def _run(self, pynvml: Any, handles: list[Any]) -> None:
        period = 1.0 / self.hz
        with open(self.path, "a", encoding="utf-8") as out:
            while not self._stop.is_set():
                t = round(time.time() - self.t0, 3)
                for i, h in enumerate(handles):
                    sample = NvmlSample(t=t, gpu=i)
                    try:
                        sample["util_pct"] = float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)
                        sample["mem_used_mib"] = round(pynvml.nvmlDeviceGetMemoryInfo(h).used / 2**20, 1)
                    except Exception as exc:  # noqa: BLE001 - a GPU that fell off the bus
                        sample["error"] = f"{type(exc).__name__}: {exc}"
                    try:
                        sample["power_w"] = round(pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0, 1)
                    except Exception:  # noqa: BLE001, S110 - not every board reports power
                        pass
                    self.samples.append(sample)
                    out.write(json.dumps(sample) + "\n")
                out.flush()
                self._stop.wait(period)

    def latest(self) -> dict[int, NvmlSample]:
        out: dict[int, NvmlSample] = {}
        for s in reversed(self.samples[-64:]):
            out.setdefault(int(s["gpu"]), s)
        return out

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            import pynvml

            if self._thread is not None:
                pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - shutting down a library that may never have started
            pass

    def summary(self) -> dict[int, dict[str, float]]:
        """gpu -> mean / max utilisation, max memory, mean power over the run."""
        out: dict[int, dict[str, float]] = {}
        for gpu in sorted({int(s["gpu"]) for s in self.samples}):
            mine = [s for s in self.samples if s["gpu"] == gpu and "util_pct" in s]
            if not mine:
                continue
            util = [float(s["util_pct"]) for s in mine]
            power = [float(s["power_w"]) for s in mine if "power_w" in s]
            out[gpu] = {
                "util_mean_pct": round(sum(util) / len(util), 1),
                "util_max_pct": max(util),
                "mem_max_mib": max(float(s["mem_used_mib"]) for s in mine),
                "power_mean_w": round(sum(power) / len(power), 1) if power else 0.0,
                "samples": float(len(mine)),
            }
        return out

    def lost_gpus(self) -> list[int]:
        return sorted({int(s["gpu"]) for s in self.samples if "error" in s and "Lost" in str(s["error"])})


def visible_env() -> str | None:
    return os.environ.get("CUDA_VISIBLE_DEVICES")
