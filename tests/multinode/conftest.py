from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.multinode.netns import Cluster, available


@pytest.fixture
def make_cluster() -> Iterator[Callable[[int], Cluster]]:
    """make_cluster(n) -> a Cluster of n namespace hosts, always torn down afterwards."""
    reason = available()
    if reason:
        pytest.skip(reason)
    made: list[Cluster] = []

    def make(n: int) -> Cluster:
        cluster = Cluster.create(n)
        made.append(cluster)
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.close()
