"""check's flags become one frozen CheckConfig at the command boundary; the layers below read only it."""

from __future__ import annotations

import argparse
import dataclasses
import re

import pytest

from ddp_doctor.checkconfig import CheckConfig
from ddp_doctor.commands import check
from ddp_doctor.commands.check import config_from_args
from tests.conftest import run_cli

# check's flags that are not part of its config: the target interpreter is resolved by the command
# (commands/check.py resolve_target, shared with bench) and the output flags are rendered by cli.
COMMAND_ONLY = {"python", "format", "output", "strict", "verbose", "quiet", "help"}


def check_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ddp-doctor check")
    check.add_arguments(parser)
    return parser


def _config(*argv: str) -> CheckConfig:
    return config_from_args(check_parser().parse_args(list(argv)))


def test_every_flag_of_check_is_a_config_field_or_the_commands_own() -> None:
    dests = {a.dest for a in check_parser()._actions}
    names = {f.name for f in dataclasses.fields(CheckConfig)}
    assert dests - COMMAND_ONLY == names


def test_flags_become_a_frozen_config_with_the_documented_defaults() -> None:
    c = _config("--nproc", "2", "--backend", "gloo", "--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "h:29500")
    assert (c.nproc, c.backend, c.nnodes, c.node_rank, c.rdzv_endpoint) == (2, "gloo", "2", 1, "h:29500")
    assert c.multinode and not _config().multinode and not _config("--nnodes", "1").multinode
    assert (c.timeout, c.dataloader_workers, c.batch_mb, c.static, c.image) == (180.0, 2, 32.0, False, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.nproc = 4  # type: ignore[misc]


def test_the_parsers_defaults_are_the_configs_defaults() -> None:
    assert _config() == CheckConfig()


def test_engine_flags_lose_the_separator() -> None:
    c = _config("--image", "img:1", "--", "--shm-size", "2g")
    assert c.image == "img:1" and c.engine_flags == ("--shm-size", "2g")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--static", "--", "--shm-size", "2g"), "need --image"),
        (("--image", "img:1", "--timeout", "0"), "argument --timeout: got '0'; expected seconds > 0"),
    ],
)
def test_bad_flags_are_a_usage_error(argv: tuple[str, ...], message: str) -> None:
    proc = run_cli("check", *argv)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"timeout": 0.0}, "--timeout must be positive, got 0"),
        ({"expect_gpus": -1}, "--expect-gpus must be 0 or more, got -1"),
        ({"nproc": 0}, "--nproc must be at least 1, got 0"),
        ({"master_port": 70000}, "--master-port must be 1..65535, got 70000"),
        ({"dataloader_workers": -2}, "--dataloader-workers must be 0 or more, got -2"),
        ({"batch_mb": 0.0}, "--batch-mb must be positive, got 0"),
        ({"join_timeout": -5.0}, "--join-timeout must be positive, got -5"),
        ({"engine_flags": ("--shm-size", "2g")}, "engine flags after '--' need --image"),
    ],
)
def test_a_config_that_could_not_run_refuses_itself(fields: dict[str, object], words: str) -> None:
    """One place checks the settings (as torch elastic's LaunchConfig does), whoever builds the config."""
    with pytest.raises(ValueError, match=re.escape(words)):
        CheckConfig(**fields)  # type: ignore[arg-type]


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(ValueError, match="--nproc must be at least 1, got 0; --batch-mb must be positive, got -1"):
        CheckConfig(nproc=0, batch_mb=-1.0)


def test_the_command_turns_a_refused_config_into_one_usage_line() -> None:
    args = check_parser().parse_args([])
    args.batch_mb = -1.0  # past the parser's own bound, as a caller building the namespace could
    with pytest.raises(check.UsageError, match="--batch-mb must be positive, got -1"):
        config_from_args(args)
