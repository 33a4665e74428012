"""The cluster file of a multi-node check: rank 0 writes it, node 0's parent reads it back through the same
records; a torn, foreign or malformed file is a RecordError that names it, and one rank's bad result costs
only that rank's result."""

from __future__ import annotations

import json

import pytest

from ddp_doctor.rundir.cluster import ClockOffset, ClusterEntry, ClusterFile, LinkFacts, Versions
from ddp_doctor.rundir.records import SCHEMA, RankResult, RecordError


def _entry(rank: int, node_rank: int, **kw: object) -> ClusterEntry:
    return ClusterEntry(
        rank=rank,
        node_rank=node_rank,
        hostname=f"host{node_rank}",
        node=f"n{node_rank}",
        local_rank=rank % 2,
        group_rank=node_rank,
        preflight=LinkFacts(interface="eth0", address=f"10.0.0.{node_rank}"),
        result=RankResult(rank=rank, pid=100 + rank, finished=True, node=f"n{node_rank}", body={"backend": "gloo"}),
        versions=Versions(torch="2.13.0+cpu", cuda=None, nccl=None, driver=None),
        **kw,  # type: ignore[arg-type]
    )


def test_a_cluster_file_comes_back_as_rank_0_wrote_it() -> None:
    written = ClusterFile(
        world_size=3,
        ranks={
            0: _entry(0, 0, bandwidth_gbps={"intra": 4.0, "inter:1": 1.5}, time=10.0, cluster_probe_s=0.4),
            2: _entry(2, 1, clock=ClockOffset(offset_s=-0.002, rtt_ms=0.3), nccl={"transports": {"NET/Socket": 2}}),
        },
        missing=(1,),
        gather_timeout_s=15.0,
        collected_at=11.0,
    )
    text = written.to_json()
    assert json.loads(text)["schema"] == SCHEMA
    assert ClusterFile.from_json(text) == written
    assert ClusterFile.from_json(text).ranks[2].label == "node 1 (host1)"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"schema": 1, "world_size": 2, "ranks": {"0": {"rank": 0', "not JSON"),  # cut short
        ('{"world_size": 2, "ranks": {}}', "no schema field"),  # an older doctor's or another tool's
        ('{"schema": 1, "ranks": {}}', "lacks its 'world_size'"),
        ('{"schema": 1, "world_size": 2, "ranks": {"zero": {"rank": 0}}}', "not a rank's object"),
        ('{"schema": 1, "world_size": 2, "ranks": {}, "missing": ["1"]}', "not a list of ranks"),
        ('{"schema": 1, "world_size": 2, "ranks": {"0": {"rank": "0"}}}', "'rank' is '0'"),
        (
            '{"schema": 1, "world_size": 2, "ranks": {"0": {"rank": 0, "bandwidth_gbps": {"intra": "fast"}}}}',
            "not numbers",
        ),
        (
            '{"schema": 1, "world_size": 2, "ranks": {"0": {"rank": 0, "clock": {"rtt_ms": 1.0}}}}',
            "lacks its 'offset_s'",
        ),
    ],
)
def test_a_torn_foreign_or_malformed_cluster_file_is_refused_with_why(text: str, said: str) -> None:
    with pytest.raises(RecordError, match="cluster.json") as caught:
        ClusterFile.from_json(text, "cluster.json")
    assert said in str(caught.value)


def test_a_rank_whose_result_is_no_record_keeps_the_rest_of_its_entry() -> None:
    good = _entry(0, 0).to_dict()
    bad = {**_entry(1, 1).to_dict(), "payload": {"rank": 1}}  # no pid: not a rank's result
    data = {"schema": SCHEMA, "world_size": 2, "ranks": {"0": good, "1": bad}}
    read = ClusterFile.from_json(json.dumps(data))
    assert read.ranks[0].result is not None and read.ranks[0].result_error is None
    assert read.ranks[1].result is None and read.ranks[1].versions is not None
    assert "lacks its 'pid'" in (read.ranks[1].result_error or "")


def test_a_result_without_its_node_takes_the_entry_s() -> None:
    entry = {**_entry(3, 1).to_dict(), "payload": {"rank": 3, "pid": 7, "finished": True}}
    read = ClusterEntry.from_dict(entry, "rank 3's")
    assert read.result is not None and read.result.node == "n1"
