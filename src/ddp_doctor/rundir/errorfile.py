"""rank-N.error.json: the error file of a rank that died of an uncaught exception, in torchelastic's
shape (`@record`: torch/distributed/elastic/multiprocessing/errors/error_handler.py writes
{"message": {"message": ..., "extraInfo": {"py_callstack": ..., "timestamp": ...}}}; jobwatch's hook
writes the same). Read here once, for the live chain and for `run`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ErrorFile:
    message: str
    """The exception as torchelastic wrote it ("RuntimeError: ..."), possibly over several lines."""
    traceback: str = ""
    timestamp: float | None = None
    """Seconds since the epoch, when the file says."""

    @property
    def headline(self) -> str:
        """The first line that is not blank: the exception line; what follows is detail and hints ("In
        addition, you can set ...", "Compile with `TORCH_USE_CUDA_DSA` ...")."""
        return next((line.strip() for line in self.message.splitlines() if line.strip()), "")

    @classmethod
    def from_object(cls, d: Mapping[str, Any]) -> ErrorFile:
        """Any JSON object read from an error file: torchelastic's nested shape, or a plain message."""
        msg = d.get("message")
        if not isinstance(msg, Mapping):
            return cls(str(msg or ""))
        extra = msg.get("extraInfo")
        extra = extra if isinstance(extra, Mapping) else {}
        stamp = str(extra.get("timestamp") or "")
        return cls(
            str(msg.get("message") or ""),
            str(extra.get("py_callstack") or ""),
            float(stamp) if stamp.isdigit() else None,
        )
