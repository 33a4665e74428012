from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm.cluster import Slurm, available


@pytest.fixture(scope="module")
def slurm() -> Iterator[Slurm]:
    """A two-node Slurm (node0, node1) for the module, always stopped and removed afterwards."""
    reason = available()
    if reason:
        pytest.skip(reason)
    cluster = Slurm.start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def job_dir(slurm: Slurm, request: pytest.FixtureRequest) -> Path:
    """A submit directory for one test, inside the cluster's temporary directory; both nodes idle."""
    slurm.ensure_healthy()
    path = slurm.root / "jobs" / re.sub(r"[^\w.-]", "_", request.node.name)
    path.mkdir(parents=True)
    return path
