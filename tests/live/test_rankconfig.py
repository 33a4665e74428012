"""The parent->rank config: one frozen record, serialised once, read back by the worker unchanged."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ddp_doctor.checkconfig import CheckConfig
from ddp_doctor.live import chain, worker
from ddp_doctor.live.rankconfig import FLAG, RankConfig

# Every CheckConfig field either reaches the ranks (here: how to read it back from the rank's record)
# or is the parent's alone. A new field fails the last test until it is placed in one of the two.
REACHES_RANKS = {
    "backend": lambda r: r.backend,
    "timeout": lambda r: r.timeout,
    "join_timeout": lambda r: r.init_timeout,
    "dataloader_workers": lambda r: r.dataloader_workers,
    "batch_mb": lambda r: r.batch_mb,
    "gpu_health": lambda r: "gpu_health" in r.phases,
    "nproc": lambda r: r.expected_world_size,  # nproc x nnodes
    "nnodes": lambda r: r.expected_world_size,
}
PARENT_ONLY = {
    "static",  # no ranks at all
    "expect_gpus",  # judged by the parent's static checks over rank 0's torch facts
    "oversubscribe",  # the parent's capacity refusal
    "master_port",  # torchrun's flags
    "keep_run_dir",
    "node_rank",
    "rdzv_endpoint",
    "rdzv_id",
    "image",  # the whole check inside an image: the parent's dispatch
    "engine",
    "engine_flags",
}

# Not CheckConfig's defaults, so a setting that fell back to a default on the rank side would show.
GIVEN = CheckConfig(
    backend="gloo",
    nproc=3,
    oversubscribe=True,
    nnodes="2",
    timeout=77.5,
    join_timeout=9.0,
    dataloader_workers=5,
    batch_mb=1.5,
    gpu_health=True,
)


def _rank_side(config: CheckConfig) -> RankConfig:
    """What a rank reads: the argv chain.py gives torchrun, through the worker's own parser."""
    _, spec, ranks = chain.plan_for(config)
    assert spec.entry_args == ranks.argv() and spec.entry_args[0] == FLAG
    return worker.config_from_argv(spec.entry_args)


def test_every_setting_of_check_that_reaches_the_ranks_travels() -> None:
    got = _rank_side(GIVEN)
    assert (got.backend, got.timeout, got.init_timeout) == ("gloo", 77.5, 9.0)
    assert (got.dataloader_workers, got.batch_mb, got.expected_world_size) == (5, 1.5, 6)
    assert got.phases == (*worker.PHASES, "gpu_health") and got.nvml is False and got.deadline is None


def test_defaults_reach_the_ranks_from_checkconfig_alone() -> None:
    got = _rank_side(CheckConfig(backend="gloo", nproc=2))
    default = CheckConfig()
    assert (got.timeout, got.dataloader_workers, got.batch_mb) == (
        default.timeout,
        default.dataloader_workers,
        default.batch_mb,
    )
    assert got.init_timeout is None and got.phases == worker.PHASES and got.expected_world_size == 2


def test_an_elastic_node_count_leaves_the_world_size_open() -> None:
    assert _rank_side(dataclasses.replace(GIVEN, nnodes="1:4")).expected_world_size is None


def test_each_checkconfig_field_is_placed() -> None:
    names = {f.name for f in dataclasses.fields(CheckConfig)}
    assert set(REACHES_RANKS) | PARENT_ONLY == names and not set(REACHES_RANKS) & PARENT_ONLY
    default, given = _rank_side(CheckConfig(backend="gloo", nproc=2)), _rank_side(GIVEN)
    for name, read in REACHES_RANKS.items():
        if name != "backend":  # both gloo here; the backend's own round trip is in the first test
            assert read(default) != read(given), name


def test_the_record_round_trips_through_json_and_the_worker_argv() -> None:
    r = RankConfig(
        backend="nccl",
        timeout=12.0,
        deadline=1_700_000_000.25,
        init_timeout=3.0,
        phases=("init", "ddp"),
        dataloader_workers=0,
        batch_mb=0.5,
        expected_world_size=16,
        nvml=True,
        steps=4,
    )
    assert RankConfig.from_json(r.to_json()) == r
    assert worker.config_from_argv(r.argv()) == r
    assert r.launched(1000.0).deadline == 1012.0 and r.launched(1000.0).phases == r.phases


@pytest.mark.parametrize(
    "change",
    [
        {"steps": None},
        {"nvml": 1},
        {"dataloader_workers": True},
        {"phases": "init"},
        {"phases": []},
        {"batch_mb": 0},
        {"typo": 1},
    ],
)
def test_a_bad_record_is_refused(change: dict[str, object]) -> None:
    data = json.loads(_rank_side(CheckConfig(backend="gloo", nproc=2)).to_json())
    with pytest.raises(ValueError, match="rank config"):
        RankConfig.from_json(json.dumps({**data, **change}))


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--backend", "gloo", "--timeout", "180"],
        [FLAG, "[1]"],
        [FLAG, json.dumps({"backend": "gloo"})],
    ],
)
def test_the_worker_takes_only_the_record(argv: list[str]) -> None:
    with pytest.raises(ValueError):
        worker.config_from_argv(argv)
