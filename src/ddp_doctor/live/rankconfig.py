"""What the parent tells every rank of the live chain: one frozen record, both sides of the boundary.

live/chain.py builds it from the CheckConfig (`for_check`) and stamps the deadline when it launches
torchrun; it travels as one JSON argument (`--config JSON`) and live/worker.py reads it back with
`from_json`. Its defaults are CheckConfig's, so each setting has one default; only `steps` is the
ranks' own. Standard library only: every rank imports it before torch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ddp_doctor.checkconfig import CheckConfig

FLAG = "--config"
DDP_STEPS = 30
"""Training steps of the ddp phase, each checked against the single-process reference."""


@dataclass(frozen=True)
class RankConfig:
    backend: str
    timeout: float
    """The overall timeout, seconds (CheckConfig.timeout)."""
    deadline: float | None
    """Epoch seconds by which every rank must be done (wall clock: ranks on other nodes share it);
    None until the parent launches torchrun, then each rank counts `timeout` from its own start."""
    init_timeout: float | None
    """Join + init_process_group, seconds (CheckConfig.join_timeout)."""
    phases: tuple[str, ...]
    dataloader_workers: int
    batch_mb: float
    expected_world_size: int | None
    """nproc x nnodes when the node count is fixed; None with an elastic MIN:MAX."""
    nvml: bool
    """Sample NVML utilisation/memory during ddp (NCCL runs)."""
    steps: int = DDP_STEPS

    def __post_init__(self) -> None:
        bad = {
            "timeout": self.timeout <= 0,
            "dataloader_workers": self.dataloader_workers < 0,
            "batch_mb": self.batch_mb <= 0,
            "steps": self.steps < 1,
            "phases": not self.phases or not all(isinstance(p, str) and p for p in self.phases),
        }
        problems = [f"{name}={getattr(self, name)!r}" for name, out in bad.items() if out]
        if problems:
            raise ValueError("a rank config out of range: " + ", ".join(problems))

    @classmethod
    def for_check(
        cls, config: CheckConfig, *, backend: str, phases: tuple[str, ...], expected_world_size: int | None
    ) -> RankConfig:
        """The settings of `check` that reach the ranks; the deadline is stamped at launch (`launched`)."""
        return cls(
            backend=backend,
            timeout=config.timeout,
            deadline=None,
            init_timeout=config.join_timeout,
            phases=phases,
            dataloader_workers=config.dataloader_workers,
            batch_mb=config.batch_mb,
            expected_world_size=expected_world_size,
            nvml=backend == "nccl",
        )

    def launched(self, now: float) -> RankConfig:
        """This record with the deadline `timeout` seconds after `now` (wall clock, shared across nodes)."""
        return replace(self, deadline=now + self.timeout)

    def argv(self) -> list[str]:
        """The worker's whole argv: the record serialised once."""
        return [FLAG, self.to_json()]

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> RankConfig:
        """The record back from `to_json`; ValueError on anything else (a missing, extra or mistyped field)."""
        data: Any = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a rank config is a JSON object")  # noqa: TRY004 - one error type for any bad record
        names = {f.name for f in fields(cls)}
        if set(data) - names:
            raise ValueError(f"unknown rank config fields: {sorted(set(data) - names)}")
        values: dict[str, Any] = {k: tuple(v) if k == "phases" and isinstance(v, list) else v for k, v in data.items()}
        for name, value in values.items():
            kinds = _TYPES[name]
            # bool is an int to isinstance; only nvml may be one.
            if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
                raise ValueError(f"rank config field {name}: {value!r}")
        try:
            return cls(**values)
        except TypeError as exc:  # a required field missing
            raise ValueError(str(exc)) from exc


# JSON types per field (JSON has no tuples; ints are accepted where floats are meant).
_TYPES: dict[str, tuple[type, ...]] = {
    "backend": (str,),
    "timeout": (int, float),
    "deadline": (int, float, type(None)),
    "init_timeout": (int, float, type(None)),
    "phases": (tuple,),
    "dataloader_workers": (int,),
    "batch_mb": (int, float),
    "expected_world_size": (int, type(None)),
    "nvml": (bool,),
    "steps": (int,),
}
