"""lint judges /dev/shm's size and a job run as root by the same units `check` uses, through a launch
config subject: across the thresholds a compose file's verdict is the shm unit's on the same size."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_doctor.checks.facts.host import ShmFacts
from ddp_doctor.checks.units import shm
from ddp_doctor.deploy.lint.engine import lint_file
from ddp_doctor.deploy.lint.subject import LaunchConfigSubject, verdicts
from ddp_doctor.report import Status

COMPOSE = """\
services:
  train:
    image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
    command: torchrun --nproc-per-node 2 train.py
    shm_size: {size}
{user}    deploy:
      resources:
        reservations:
          devices:
            - driver: nvidia
              count: 2
              capabilities: [gpu]
"""
MiB = 1 << 20


@pytest.mark.parametrize("mib", [64, 255, 256, 512, 1023, 1024, 8192])
def test_lint_shm_verdict_is_the_shm_units(tmp_path: Path, mib: int) -> None:
    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE.format(size=f"{mib}m", user='    user: "1000:1000"\n'))
    found = {r.id: r for r in lint_file(str(path)).results}
    unit = shm.CHECK.run(ShmFacts(size_bytes=mib * MiB, free_bytes=None), "env").status
    lint = found.get("lint.compose.shm_small")
    assert (lint.status if lint is not None else Status.PASS) == unit  # an error is a FAIL, a warning a WARN
    assert "lint.compose.run_as_root" not in found


def test_the_config_subject_says_only_what_the_config_states(tmp_path: Path) -> None:
    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE.format(size="128m", user=""))
    (unit,) = lint_file(str(path)).units
    said = verdicts(unit)
    assert set(said) == {"shm", "user"}
    assert (said["shm"].status, said["user"].status) == (Status.FAIL, Status.WARN)
    assert "runs as root" in said["user"].summary
    assert LaunchConfigSubject(unit).facts(int) is None  # nothing else is read from a config
