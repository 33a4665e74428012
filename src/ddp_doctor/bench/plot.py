"""busbw against message size as PNG or SVG (matplotlib: the optional `plot` extra)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from ddp_doctor.bench.results import is_op_result, points_of
from ddp_doctor.errors import DoctorError, UsageError
from ddp_doctor.report import Report
from ddp_doctor.words import plural

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = {".png": "png", ".svg": "svg"}
_NO_MATPLOTLIB = "--plot needs matplotlib: pip install 'ddp-doctor[plot]' (or pip install matplotlib)"


def check_path(path: str) -> str:
    """The format, from the name; a UsageError before any work when it or matplotlib is missing."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise UsageError(f"--plot {path}: the file name must end in .png or .svg")
    try:
        found = importlib.util.find_spec("matplotlib")
    except (ImportError, ValueError):  # a broken install is as good as none
        found = None
    if found is None:
        raise UsageError(_NO_MATPLOTLIB)
    return fmt


def write(path: str, runs: list[tuple[str, Report]]) -> None:
    """One line per (run, op, dtype, mode); runs after the first are drawn dashed (baselines)."""
    fmt = check_path(path)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(_NO_MATPLOTLIB) from None

    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=110)
    drawn = 0
    for index, (label, report) in enumerate(runs):
        for result in report.results:
            if not is_op_result(result) or result.observed.get("op") == "barrier":
                continue
            points = points_of(result)
            for inplace in (False, True):
                series = sorted((p for p in points if bool(p.get("inplace")) == inplace), key=lambda p: int(p["bytes"]))
                if not series:
                    continue
                mode = "in-place" if inplace else "out-of-place"
                ax.plot(
                    [int(p["bytes"]) for p in series],
                    [float(p["busbw_gbps"]) for p in series],
                    linestyle="-" if index == 0 else "--",
                    marker="o",
                    markersize=3,
                    label=f"{label}: {result.observed.get('op')} {result.observed.get('dtype')} {mode}",
                )
                drawn += 1
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s, nccl-tests definition)")
    world = runs[0][1].facts.get("world_size") if runs else None
    backend = runs[0][1].facts.get("backend") if runs else None
    ax.set_title(f"ddp-doctor bench: busbw vs size ({plural(int(world or 0), 'rank')}, {backend})")
    ax.grid(True, which="both", alpha=0.3)
    if drawn:
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    try:
        _save(fig, path, fmt)
    except OSError as exc:
        raise DoctorError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)


def _save(fig: Figure, path: str, fmt: str) -> None:
    """Drawn beside the target and renamed over it; the temp file goes on every way out (an error,
    Ctrl-C or SIGTERM during a slow draw), so the user's directory keeps no half plot."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".ddp-doctor-plot-", suffix=f".{fmt}")
    os.close(fd)
    try:
        fig.savefig(tmp, format=fmt)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
