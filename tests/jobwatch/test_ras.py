"""NCCL RAS: the text reports NCCL prints (copied verbatim, tests/fixtures/ras/SOURCES.md) and the client's deadlines."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_doctor.jobwatch import ras

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ras"


def _parse(name: str) -> ras.RasReport:
    return ras.parse((FIXTURES / name).read_text())


def test_healthy_report_has_no_findings() -> None:
    rep = _parse("healthy_nccl_issue_1730.txt")
    assert rep.nccl_version == "2.26.2"
    assert [(g.status, g.errors) for g in rep.groups] == [("RUNNING", "OK")]
    assert ras.findings(rep, {}) == []
    line = ras.headline(ras.RasAnswer("localhost:28028", rep, seconds=0.1), {})
    assert "no dead or missing peer" in line and "RUNNING OK" in line


def test_mismatch_names_counts_and_the_listed_ranks() -> None:
    rep = _parse("mismatch_nccl_issue_1911.txt")
    (mm,) = rep.mismatches
    assert mm.comm == "#0-0 (fa93daea854b060b)"
    assert "AllGather" in mm.what
    assert mm.counts == ((30, 640), (2, 641))
    assert [(r.rank, r.pid) for r in mm.listed] == [(12, 323032), (13, 323033)]
    assert not rep.dead and not rep.missing_processes and not rep.missing_ranks
    # Process 323033 is one of ours: the finding says which rank it is here.
    (line,) = ras.findings(rep, {323033: 5})
    assert (
        "30 ranks launched up to operation 640" in line
        and "rank 13 (process 323033 on 10.137.190.124 = rank 5 here)" in line
    )


def test_incomplete_names_the_silent_process_and_rank() -> None:
    rep = _parse("incomplete_nccl_issue_1762.txt")
    assert rep.nccl_version == "2.27.3"
    assert rep.missing_processes == (ras.RasProcess(60004, "10.4.109.13", "0"),)
    assert rep.missing_ranks == {"#0-0 (b3398875b8b2a063)": (ras.RasRank(1, 60004, "10.4.109.13", "0"),)}
    assert [g.errors for g in rep.groups] == ["INCOMPLETE", "MISMATCH", "INCOMPLETE,MISMATCH"]


def test_user_guide_incomplete_then_dead() -> None:
    first = _parse("incomplete_nccl_user_guide.txt")
    assert first.missing_processes == (ras.RasProcess(3487984, "172.16.64.213", "5"),)
    assert first.missing_ranks == {"#0-0 (cf264af53edbe986)": (ras.RasRank(21),)}
    assert first.timeouts == 2 and not first.dead
    later = _parse("dead_nccl_user_guide.txt")
    assert later.dead == (ras.RasProcess(3487984, "172.16.64.213", "5"),)
    assert later.missing_ranks == {"#0-0 (cf264af53edbe986)": (ras.RasRank(21),)}
    lines = ras.findings(later, {3487984: 1})
    assert lines[0].startswith("DEAD: process 3487984 on node 172.16.64.213 (GPU 5) = rank 1 here")
    assert "communicator #0-0 (cf264af53edbe986) has no data from rank 21" in lines[1]


def test_address_and_switch_come_from_the_jobs_environment() -> None:
    assert ras.address({}) == ("localhost", 28028, "localhost:28028")
    assert ras.address({"NCCL_RAS_ADDR": "127.0.0.1:29123"}) == ("127.0.0.1", 29123, "127.0.0.1:29123")
    answer = ras.query({"NCCL_RAS_ENABLE": "0"})
    assert answer.report is None and "NCCL_RAS_ENABLE=0" in answer.why_not


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_nothing_listening_is_unavailable_at_once() -> None:
    port = _free_port()
    t0 = time.monotonic()
    answer = ras.query({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"})
    assert answer.report is None and "nothing listens" in answer.why_not
    assert time.monotonic() - t0 < 30  # a bound for a hang, not a timing: nothing listens, so no wait at all


@pytest.fixture
def server() -> Iterator[tuple[int, list[bytes], dict[str, str]]]:
    """A socket that speaks RAS's client protocol (protocol 2, as NCCL's src/ras/client.cc expects) and replays
    a fixture, or accepts and never answers (mode 'silent')."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    got: list[bytes] = []
    mode = {"reply": "mismatch_nccl_issue_1911.txt"}

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            f = conn.makefile("rb")
            got.append(f.readline())
            if mode["reply"] == "silent":
                time.sleep(3)
                return
            conn.sendall(b"SERVER PROTOCOL 2\n")
            got.append(f.readline())
            conn.sendall(b"OK\n")
            got.append(f.readline())
            conn.sendall((FIXTURES / mode["reply"]).read_bytes())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(srv.getsockname()[1]), got, mode
    finally:
        srv.close()


def test_query_speaks_the_protocol_and_parses_the_answer(server: tuple[int, list[bytes], dict[str, str]]) -> None:
    port, got, _ = server
    answer = ras.query({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"})
    assert got == [b"CLIENT PROTOCOL 2\n", b"TIMEOUT 5\n", b"STATUS\n"]
    assert answer.report is not None and answer.report.mismatches[0].counts == ((30, 640), (2, 641))


def test_a_silent_ras_is_given_up_at_the_deadline(server: tuple[int, list[bytes], dict[str, str]]) -> None:
    port, _, mode = server
    mode["reply"] = "silent"
    t0 = time.monotonic()
    answer = ras.query({"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}, deadline_s=1.0)
    assert answer.report is None and "did not answer within 1 s" in answer.why_not
    assert time.monotonic() - t0 < 30  # the silent server never answers: without the deadline this hangs


def test_a_listener_outside_the_job_is_not_asked(server: tuple[int, list[bytes], dict[str, str]]) -> None:
    port, got, _ = server
    env = {"NCCL_RAS_ADDR": f"127.0.0.1:{port}"}
    # The listener is this test process (the fixture's socket): for a job of other pids it is another job's RAS.
    answer = ras.ask(env, job_pids=[1])
    assert answer.report is None and "outside this job" in answer.why_not and got == []
    listening, owner = ras.listener(port, [os.getpid()])
    assert listening and owner == os.getpid()
    answer = ras.ask(env, job_pids=[os.getpid()])
    assert answer.report is not None and got[0] == b"CLIENT PROTOCOL 2\n"
