"""The launcher as data: argv and env for every rendezvous shape, plus the parsers it relies on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddp_doctor.live import faults, launch, nccl_log
from ddp_doctor.live.launch import TorchrunSpec, build_command, port_problem
from ddp_doctor.rundir import layout, reader, writer
from ddp_doctor.rundir.logs import parse_exit_codes
from ddp_doctor.rundir.records import RankResult

TORCHRUN = ("/opt/env/bin/torchrun",)


def spec(**kw: object) -> TorchrunSpec:
    base: dict[str, object] = {
        "entry_module": "ddp_doctor.live.worker",
        "entry_args": ["--backend", "gloo"],
        "nproc": 2,
        "backend": "gloo",
        "timeout_s": 30.0,
        "env": {"NCCL_DEBUG_FILE": "{run_dir}/nccl.%p.log"},
        "launcher": TORCHRUN,
    }
    base.update(kw)
    return TorchrunSpec(**base)  # type: ignore[arg-type]


def test_standalone_single_node(tmp_path: Path) -> None:
    argv, env = build_command(spec(), tmp_path)
    assert argv == [
        "/opt/env/bin/torchrun",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "0",
        "--monitor-interval",
        "0.1",
        "--log-dir",
        str(tmp_path / "torchelastic"),
        "-m",
        "ddp_doctor.live.worker",
        "--backend",
        "gloo",
    ]
    assert env[layout.RUN_DIR_ENV] == str(tmp_path)
    assert env["NCCL_DEBUG_FILE"] == f"{tmp_path}/nccl.%p.log"
    src = str(Path(launch.__file__).resolve().parents[2])
    assert env["PYTHONPATH"].split(os.pathsep)[0] == src
    assert env["PYTHONUNBUFFERED"] == "1"
    assert env["TMPDIR"] == str(launch.rank_tmp_dir(tmp_path)), "the ranks' temp files are removed with the run"


def test_rank_tmp_dir_leaves_room_for_unix_sockets() -> None:
    short = Path("/tmp/ddp-doctor-run-abc")
    assert launch.rank_tmp_dir(short) == short / "tmp"
    deep = Path("/tmp/" + "d" * 80 + "/ddp-doctor-run-abc")  # a long TMPDIR, as pytest's tmp_path can be
    assert launch.rank_tmp_dir(deep) == Path("/tmp/ddp-doctor-run-abc-tmp")
    socket_path = launch.rank_tmp_dir(deep) / "pymp-abcdefgh" / "listener-abcdefgh"
    assert len(str(socket_path)) <= launch.UNIX_PATH_MAX


def test_master_port_becomes_a_local_c10d_endpoint(tmp_path: Path) -> None:
    argv, _ = build_command(spec(master_port=29511, rdzv_id="fixed"), tmp_path)
    assert "--standalone" not in argv
    i = argv.index("--rdzv-endpoint")
    assert argv[i + 1] == "127.0.0.1:29511"
    assert argv[argv.index("--rdzv-backend") + 1] == "c10d"
    assert argv[argv.index("--rdzv-id") + 1] == "fixed"


def test_multi_node_rendezvous(tmp_path: Path) -> None:
    argv, env = build_command(
        spec(nnodes="2:4", node_rank=1, rdzv_endpoint="10.0.0.1:29400", rdzv_id="job7", join_timeout_s=60), tmp_path
    )
    assert argv[argv.index("--nnodes") + 1] == "2:4"
    assert argv[argv.index("--rdzv-endpoint") + 1] == "10.0.0.1:29400"
    assert argv[argv.index("--rdzv-conf") + 1] == "join_timeout=60"
    assert env["DDP_DOCTOR_NODE_RANK"] == "1"
    assert "--standalone" not in argv


def test_launcher_falls_back_to_the_module(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python3"))
    prefix, source = launch.find_torchrun()
    assert source == "module"
    assert prefix == (str(tmp_path / "python3"), "-m", "torch.distributed.run")
    (tmp_path / "torchrun").write_text("#!/bin/sh\n")
    (tmp_path / "torchrun").chmod(0o755)
    assert launch.find_torchrun() == ((str(tmp_path / "torchrun"),), "path")


def test_port_problem_names_the_holder() -> None:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        problem = port_problem(port)
        assert problem is not None and f"port {port}" in problem
        assert f"pid {os.getpid()}" in problem
    assert port_problem(port) is None


def test_a_port_in_time_wait_is_free_for_the_store() -> None:
    """The previous job's rendezvous store closed its connections first: TIME_WAIT holds the port for a
    minute, yet the next TCPStore binds it (both with SO_REUSEADDR); the check must not call it taken."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as TCPStore's listener
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)) as client:
            conn, _ = listener.accept()
            conn.close()  # the server side closes first: its end goes to TIME_WAIT
            client.recv(1)
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("0.0.0.0", port))  # the state the check used to misread
    assert port_problem(port) is None


def test_parse_exit_codes_from_torchrun_summary() -> None:
    text = """Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_15:02:28
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 12181)  (SIGKILL)
Other Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 12180)
"""
    assert parse_exit_codes(text) == {"rank 1": -9, "rank 0": 1}


def test_fault_switch_parsing() -> None:
    parsed = faults.parse("rank=1,phase=collectives,action=kill;rank=0,phase=balance,action=slow,factor=3")
    assert parsed == [faults.Fault(1, "collectives", "kill"), faults.Fault(0, "balance", "slow", 3.0)]
    assert faults.slow_factor(parsed, 0, "balance") == 3.0
    assert faults.slow_factor(parsed, 1, "balance") == 1.0
    with pytest.raises(ValueError, match="not one of"):
        faults.parse("rank=1,action=explode")
    with pytest.raises(RuntimeError, match="injected fault"):
        faults.trigger(faults.parse("rank=2,phase=ddp,action=raise"), 2, "ddp")
    faults.trigger(faults.parse("rank=2,phase=ddp,action=raise"), 1, "ddp")  # other ranks are untouched


def test_nccl_transports_parsed() -> None:
    lines = [
        "h:1:2 [0] NCCL INFO NCCL version 2.27.3+cuda12.9",
        "h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
        "h:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
        "h:1:2 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0",
        "h:1:2 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct",
    ]
    info = nccl_log.parse(lines)
    assert info["version"] == "2.27.3+cuda12.9"
    assert info["ib_devices"].startswith("[0]mlx5_0:1/IB")
    assert info["transports"] == {"P2P": 2, "NET/Socket": 1, "SHM": 1}


def test_rank_files_are_read_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(layout.RUN_DIR_ENV, str(tmp_path))
    monkeypatch.setenv("RANK", "3")
    writer.heartbeat("ddp", "step:4")
    writer.write_result(RankResult.of({"rank": 3, "pid": os.getpid(), "phases": []}))
    (tmp_path / "rank-4.json").write_text("{half a file")  # never half-written by the writer, but named
    beats = reader.read_heartbeats(tmp_path)
    assert beats[3].phase == "ddp" and beats[3].step == "step:4" and beats[3].pid == os.getpid()
    results = reader.results(tmp_path)
    assert results.records == {3: RankResult(rank=3, pid=os.getpid(), finished=False)}
    assert list(results.unreadable) == ["rank-4.json"] and "not JSON" in results.unreadable["rank-4.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_launcher_that_dies_at_once_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ddp_doctor.live.chain import _launch_result
    from ddp_doctor.live.merge import Plan

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    broken = (sys.executable, "-c", "import sys; sys.exit('ModuleNotFoundError: No module named torch')")
    outcome = launch.launch(spec(launcher=broken, timeout_s=20))
    assert outcome.returncode == 1 and not outcome.heartbeats
    result = _launch_result(outcome, Plan("gloo", 2, 2, "1", ["init"], 20, "n0"))
    assert result.status.value == "fail"
    assert "before any rank started" in result.summary and "No module named torch" in result.summary
    assert list(tmp_path.iterdir()) == []  # the run directory is gone


def test_the_parent_wakes_when_torchrun_exits_not_at_the_next_poll() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    waiter = launch._exit_waiter(child.pid)
    try:
        assert waiter.fd is not None  # Linux 5.3+: a pidfd, so the wait ends with the child
        started = time.monotonic()
        waiter(120.0)
        # Woken by the exit, not by the timeout (which would have taken all of 120 s).
        assert time.monotonic() - started < 100.0 and child.poll() is not None
    finally:
        waiter.close()
        child.wait()
    assert waiter.fd is None
