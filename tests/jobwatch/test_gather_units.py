"""The one message between nodes (NodeReport) over node 0's real listening socket: a node's report joins,
and anything else is refused with why instead of reaching the join."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest

from ddp_doctor.jobwatch import gather
from ddp_doctor.jobwatch.config import WatchConfig
from ddp_doctor.jobwatch.gather import NodeReport
from ddp_doctor.report import Report, Result, Status


def _report(host: str, status: Status) -> Report:
    report = Report(command="run", target={"host": host})
    report.add(Result("run.job", "The job", status, f"on {host}"))
    return report


def _raw(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack("!Q", len(data)) + data)
        s.recv(2)


def test_a_node_report_round_trips() -> None:
    sent = NodeReport(2, _report("n2", Status.FAIL))
    back = NodeReport.from_json(sent.to_json())
    assert back.node_rank == 2 and back.report.results[0].summary == "on n2"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"command": "run"', "Expecting"),
        (b"[1]", "JSON but not an object: list"),
        (b'{"command": "run", "results": []}', "node_rank None, not a node rank"),
        (b'{"command": "run", "results": [], "node_rank": "1"}', "node_rank '1', not a node rank"),
    ],
)
def test_what_is_no_node_report_says_why(data: bytes, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        NodeReport.from_json(data)


def test_node_0_joins_what_a_node_sent_and_refuses_a_foreign_message(tmp_path: Path) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.5)
    port = sock.getsockname()[1]
    server = gather.Server(sock)
    try:
        _raw(port, b'{"not": "a report"}')
        cfg = WatchConfig(command=("x",), run_dir=tmp_path, node_rank=1, gather=f"127.0.0.1:{port}")
        sent = _report("n1", Status.FAIL)
        gather.send(cfg, sent)
        received = server.wait(1, 30)
    finally:
        server.close()
    assert [n.node_rank for n in received] == [1]
    assert len(server.errors) == 1 and "node_rank None" in server.errors[0]
    assert sent.facts["gather"]["sent_to"] == f"127.0.0.1:{port}"
    here = _report("n0", Status.PASS)
    gather.join(here, received, nnodes=2)
    assert [(r.id, r.node) for r in here.results] == [("run.job", "n0"), ("run.job", "n1"), ("run.gather", None)]
    assert sorted(here.facts["nodes"]) == ["0", "1"]
