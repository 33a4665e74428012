"""A failure no signature knows still gets words: rank, exception line, where it was raised, phase, next step.

The traceback texts below are what Python and torch print (torch 2.13 on CPU, real runs of the calls named);
paths are shortened to a venv's site-packages.
"""

from __future__ import annotations

import pytest

from ddp_doctor.diagnose import explain_text, phases, sources
from ddp_doctor.diagnose.lines import Origin
from ddp_doctor.diagnose.timestamps import Clock
from ddp_doctor.report import Result, Status

SP = "/opt/venv/lib/python3.11/site-packages"


def _root(text: str) -> Result:
    results = explain_text(text, "job.log")
    failing = [r for r in results if r.status is Status.FAIL]
    assert failing, [(r.id, r.status, r.summary) for r in results]
    return failing[0]


def _frames(*spec: tuple[str, int, str]) -> tuple[phases.TracebackFrame, ...]:
    return tuple(phases.TracebackFrame(p, n, f) for p, n, f in spec)


def test_the_exception_line_of_a_multi_line_message_is_its_first_line_not_a_trailing_hint() -> None:
    log = f"""[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/train.py", line 40, in <module>
[rank1]:     loss = model(x).sum()
[rank1]:            ^^^^^^^^
[rank1]:   File "{SP}/torch/nn/modules/module.py", line 1779, in _wrapped_call_impl
[rank1]:     return self._call_impl(*args, **kwargs)
[rank1]:   File "{SP}/torch/nn/parallel/distributed.py", line 1654, in forward
[rank1]:     inputs, kwargs = self._pre_forward(*inputs, **kwargs)
[rank1]:   File "{SP}/torch/nn/parallel/distributed.py", line 1536, in _pre_forward
[rank1]:     if torch.is_grad_enabled() and self.reducer._rebuild_buckets():
[rank1]: RuntimeError: Buckets were rebuilt for a module whose layout changed (a message no signature knows)
[rank1]: on this rank only.
[rank1]:  In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL to print parameter names for further debugging.
"""
    root = _root(log)
    assert root.id == "diag.unknown" and root.rank == 1
    assert root.observed["exception"] == "RuntimeError"
    assert root.observed["message"].startswith("Buckets were rebuilt")
    assert "In addition" not in root.summary
    assert root.observed["phase"] == "forward" and root.observed["library"] == "DDP"
    assert root.observed["raised_at"] == "torch/nn/parallel/distributed.py:1536 in _pre_forward"
    assert root.observed["user_frame"] == "work/train.py:40 in <module>"
    assert "find_unused_parameters" in (root.remedy or "")  # DDP's own next step for the forward phase
    # With DDP's real message the signature names it, and says where it was raised
    known = _root(
        log.replace(
            "Buckets were rebuilt for a module whose layout changed",
            "Expected to have finished reduction in the prior iteration before starting a new one. This error indicates that your module has parameters that were not used in producing loss.",
        )
    )
    assert known.id == "diag.ddp_unused_parameters" and known.observed["phase"] == "forward"
    assert "in the forward pass (DDP; raised at torch/nn/parallel/distributed.py:1536" in known.summary


def test_set_device_at_the_top_of_a_script_is_device_setup() -> None:
    p = phases.place(
        _frames(("/work/train.py", 3, "<module>"), (f"{SP}/torch/cuda/__init__.py", 567, "set_device")),
        "AttributeError",
    )
    assert p.phase is not None and p.phase.name == "device"
    assert "LOCAL_RANK" in (p.next_step or "")


@pytest.mark.parametrize(
    ("frames", "phase", "library"),
    [
        # FSDP's constructor runs a broadcast: the constructor names the phase, not the collective
        (
            (
                ("/w/t.py", 9, "main"),
                (f"{SP}/torch/distributed/fsdp/fully_sharded_data_parallel.py", 480, "__init__"),
                (f"{SP}/torch/distributed/fsdp/_init_utils.py", 650, "_sync_module_params_and_buffers"),
                (f"{SP}/torch/distributed/distributed_c10d.py", 2800, "broadcast"),
            ),
            "wrap",
            "FSDP",
        ),
        (
            (("/w/t.py", 9, "main"), (f"{SP}/torch/distributed/distributed_c10d.py", 2800, "all_reduce")),
            "collective",
            "torch.distributed",
        ),
        (
            (("/w/t.py", 9, "main"), (f"{SP}/torch/serialization.py", 960, "save")),
            "checkpoint",
            "torch.save / torch.load",
        ),
        ((("/w/t.py", 9, "main"), (f"{SP}/torch/optim/adam.py", 213, "step")), "optimizer", "torch.optim"),
        (
            (
                ("/w/t.py", 9, "main"),
                (f"{SP}/torch/_tensor.py", 625, "backward"),
                (f"{SP}/torch/autograd/graph.py", 841, "_engine_run_backward"),
            ),
            "backward",
            "autograd",
        ),
        (
            (
                ("/w/t.py", 9, "main"),
                (f"{SP}/deepspeed/__init__.py", 193, "initialize"),
                (f"{SP}/deepspeed/runtime/config.py", 950, "_batch_assertion"),
            ),
            "wrap",
            "DeepSpeed",
        ),
        (
            (("/w/t.py", 9, "main"), (f"{SP}/accelerate/accelerator.py", 1400, "prepare")),
            "wrap",
            "Accelerate",
        ),
        ((("/w/t.py", 1, "<module>"), ("/w/mylib/__init__.py", 3, "<module>")), "startup", None),
        ((("/w/t.py", 9, "main"), (f"{SP}/torch/utils/data/dataloader.py", 733, "__next__")), "data", "DataLoader"),
        (
            (("/w/t.py", 9, "main"), (f"{SP}/torch/distributed/distributed_c10d.py", 2100, "destroy_process_group")),
            "teardown",
            "torch.distributed",
        ),
    ],
)
def test_the_phase_comes_from_the_frames(
    frames: tuple[tuple[str, int, str], ...], phase: str, library: str | None
) -> None:
    p = phases.place(_frames(*frames), "RuntimeError")
    assert p.phase is not None and p.phase.name == phase
    assert p.library == library


def test_the_first_failing_rank_is_the_one_not_reacting_to_another() -> None:
    # rank 0's error (its peer went away) prints first, yet rank 1's ValueError is the cause
    log = f"""[rank0]: Traceback (most recent call last):
[rank0]:   File "/tmp/rk.py", line 6, in <module>
[rank0]:     dist.barrier()
[rank0]:   File "{SP}/torch/distributed/distributed_c10d.py", line 5356, in barrier
[rank0]:     work.wait()
[rank0]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:26036
[rank1]: Traceback (most recent call last):
[rank1]:   File "/tmp/rk.py", line 5, in <module>
[rank1]:     if r==1: raise ValueError("boom on rank 1")
[rank1]: ValueError: boom on rank 1
"""
    results = explain_text(log, "job.log")
    assert results[0].id == "diag.unknown" and results[0].rank == 1, [(r.id, r.summary) for r in results]
    assert "ValueError: boom on rank 1" in results[0].summary
    assert "diag.peer_lost" in [r.id for r in results]


def test_interleaved_tracebacks_are_followed_per_rank() -> None:
    log = """[default0]:Traceback (most recent call last):
[default1]:Traceback (most recent call last):
[default0]:  File "/w/a.py", line 3, in <module>
[default1]:  File "/w/a.py", line 7, in <module>
[default0]:    f()
[default1]:    g()
[default1]:KeyError: 'lr'
[default0]:TypeError: f() missing 1 required positional argument: 'x'
"""
    root = _root(log)
    assert root.observed["exception"] == "TypeError" and "local rank 0" in root.summary
    assert "KeyError" in " ".join(e.text for e in root.evidence)


def test_a_dataloader_worker_s_own_error_is_named_not_the_wrapper() -> None:
    log = f"""Traceback (most recent call last):
  File "/w/t.py", line 20, in <module>
    for batch in loader:
  File "{SP}/torch/utils/data/dataloader.py", line 733, in __next__
    data = self._next_data()
  File "{SP}/torch/_utils.py", line 750, in reraise
    raise exception
ValueError: Caught ValueError in DataLoader worker process 0.
Original Traceback (most recent call last):
  File "{SP}/torch/utils/data/_utils/worker.py", line 349, in _worker_loop
    data = fetcher.fetch(index)
  File "/w/data.py", line 12, in __getitem__
    raise ValueError(f"corrupt sample {{i}}")
ValueError: corrupt sample 7
"""
    root = _root(log)
    assert root.observed["message"] == "corrupt sample 7" and root.observed["phase"] == "data"
    assert root.observed["user_frame"] == "w/data.py:12 in __getitem__"


def test_an_exception_python_ignored_is_no_failure() -> None:
    log = """step 100 loss 0.1
Exception ignored in: <function Writer.__del__ at 0x7f00>
Traceback (most recent call last):
  File "/w/log.py", line 9, in __del__
    self.f.close()
AttributeError: 'NoneType' object has no attribute 'close'
"""
    assert not [r for r in explain_text(log, "job.log") if r.status is Status.FAIL and r.id != "diag.unknown"]
    unknown = [r for r in explain_text(log, "job.log") if r.id == "diag.unknown"]
    assert all(r.observed.get("exception") is None for r in unknown)


@pytest.mark.parametrize(
    "line",
    [
        "Killed",
        "/var/spool/slurmd/job123/slurm_script: line 12: 48213 Killed                  python train.py",
        "Segmentation fault (core dumped)",
        "srun: error: gpu-07: task 3: Exited with exit code 1",
        "srun: error: gpu-07: task 5: Killed",
        "slurmstepd: error: *** JOB 4242 ON gpu-07 CANCELLED AT 2024-05-01T12:00:00 DUE TO TIME LIMIT ***",
        "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed.",
        "[Wed May  1 12:00:00 2024] Out of memory: Killed process 48213 (python) total-vm:80000000kB",
        "mpirun noticed that process rank 3 with PID 0 on node gpu-07 exited on signal 9 (Killed).",
        "[2024-05-01 12:00:00,000] [INFO] [launch.py:351:main] Process 4242 exits with return code = 1",
        "subprocess.CalledProcessError: Command '['/usr/bin/python', 'train.py']' returned non-zero exit status 1.",
        "  exitcode  : -6 (pid: 4242)",
        "torch.distributed.elastic.multiprocessing.api.SignalException: Process 4242 got signal: 15",
        "RuntimeError: CUDA error: an illegal instruction was encountered",
        "train-worker-1 exited with code 137",
        "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.16 GiB for an array with shape (1000, 3, 512)",
        "slurmstepd: error: execve(): /tmp/slurmd/job00089/slurm_script: No such file or directory",
        "srun: error: Unable to create step for job 29986033: Memory required by task is not available",
        "docker: Error response from daemon: stderr: nvidia-container-cli: initialization error: nvml error: driver not loaded",
        "Processing batches ━━━━━━━━━━━━━━   0% -:--:--Segmentation fault (core dumped)",
    ],
)
def test_a_process_ending_badly_is_never_healthy(line: str) -> None:
    log = f"epoch 1 step 10 loss 0.5\n{line}\n"
    results = explain_text(log, "job.log")
    assert any(r.status is Status.FAIL for r in results), [(r.id, r.status, r.summary) for r in results]


@pytest.mark.parametrize(
    "line",
    [
        "gpu-node-0:4103:4131 [3] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
        "epoch 3: eval accuracy 0.91, no errors",
        "[rank0]: step 100 loss 0.1 killed_tokens 0",
        "Exit code meanings: 0 ok",
    ],
)
def test_harmless_lines_stay_healthy(line: str) -> None:
    results = explain_text(f"{line}\nstep 2 loss 0.4\n", "job.log")
    assert not any(r.status is Status.FAIL for r in results), [(r.id, r.summary) for r in results]


def test_a_file_name_gives_the_rank_of_lines_that_carry_none() -> None:
    assert sources.origin_of("run/attempt_0/3/stderr.log") == Origin(local_rank=3)
    assert sources.origin_of("rank-2.log") == Origin(rank=2)
    assert sources.origin_of("logs/train_rank5.out") == Origin(rank=5)
    assert sources.origin_of("worker.log") is None
    # a `ddp-doctor run` directory names the launcher's log by its pid: never a rank
    assert sources.origin_of("run/proc-787.log") == Origin(pid=787)
    assert sources.origin_of("logs/process_3.log") == Origin(rank=3)
    by_task = sources.origins(["out/slurm-881_0.out", "out/slurm-881_1.out"])
    assert by_task["out/slurm-881_1.out"] == Origin(rank=1)
    pods = sources.origins(["train-worker-0.log", "train-worker-1.log"])
    assert pods["train-worker-1.log"] == Origin(node="train-worker-1")
    results = explain_text(
        'Traceback (most recent call last):\n  File "/w/t.py", line 1, in <module>\nOSError: x\n', "rank-4.log"
    )
    assert results[0].rank == 4


@pytest.mark.parametrize(
    ("line", "seconds"),
    [
        ("2024-05-01T12:00:01.500000000Z [pod/w-0/c] hello", 1714564801.5),
        ("[2024-05-01 12:00:01,250] torch.distributed.run: [WARNING] x", 1714564801.25),
        ("05/01/2024 12:00:01 - INFO - __main__ - x", 1714564801.0),
        ("  time      : 2024-05-01_12:00:01", 1714564801.0),
    ],
)
def test_line_times(line: str, seconds: float) -> None:
    assert Clock().when(line) == pytest.approx(seconds)


def test_glog_times_take_the_year_of_the_last_full_date() -> None:
    clock = Clock()
    clock.when("2024-05-01 11:00:00,000 start")
    assert clock.when("E0501 12:00:01.000000 4242 ProcessGroupNCCL.cpp:1] x") == pytest.approx(1714564801.0)
    assert Clock().when("no time here") is None


def test_nccl_rank_announcements_read_once_per_process_still_name_the_rank() -> None:
    comm = (
        "node-a:{pid}:{tid} [{g}] NCCL INFO comm 0x{c:x} rank {r} nRanks 2 nNodes 1 localRanks 2 localRank {g} MNNVL 0"
    )
    lines = [comm.format(pid=100 + r, tid=200 + c, g=r, c=c, r=r) for c in range(50) for r in (0, 1)]
    lines.append("node-a:101:999 [1] transport/net.cc:1 NCCL WARN Cuda failure 'out of memory'")
    lines.append("node-a:101:999 [1] NCCL INFO init.cc:2 -> 1")
    results = explain_text("\n".join(lines) + "\n", "nccl.log")
    assert any(r.rank == 1 for r in results if r.status is Status.FAIL), [(r.id, r.rank) for r in results]


def test_a_traceback_cut_off_before_its_exception_line_is_still_a_failure_with_its_phase() -> None:
    log = f"""Traceback (most recent call last):
  File "train.py", line 11, in <module>
    torch.distributed.init_process_group(backend="nccl", world_size=4)
  File "{SP}/torch/distributed/distributed_c10d.py", line 423, in init_process_group
    store, rank, world_size = next(rendezvous_iterator)
  File "{SP}/torch/distributed/rendezvous.py", line 166, in _env_rendezvous_handler
    raise _store_error("timed out")
"""
    root = _root(log)
    assert root.id == "diag.unknown"
    assert root.observed["phase"] == "init" and root.observed["user_frame"] == "train.py:11 in <module>"
    assert 'raise _store_error("timed out")' in root.summary


def test_a_cut_traceback_whose_last_line_names_its_cause_gets_that_signature_and_its_phase() -> None:
    # torch's env:// rendezvous raising for a variable the launcher sets: the process was not started by one
    log = f"""Traceback (most recent call last):
  File "train.py", line 11, in <module>
    torch.distributed.init_process_group(backend="nccl", world_size=4)
  File "{SP}/torch/distributed/distributed_c10d.py", line 423, in init_process_group
    store, rank, world_size = next(rendezvous_iterator)
  File "{SP}/torch/distributed/rendezvous.py", line 166, in _env_rendezvous_handler
    raise _env_error("MASTER_ADDR")
"""
    root = _root(log)
    assert root.id == "diag.env_not_set" and root.observed.get("phase") == "init", root.observed


def test_a_traceback_pasted_onto_one_line_is_read_from_its_raise() -> None:
    # A copy that lost its line breaks: the frame, its source line (a raise) and trailing blanks on one line.
    log = f'  File "{SP}/somelib/setup.py", line 73, in prepare' + " " * 20 + "raise ValueError('bad layout 7')   \n"
    root = _root(log)
    assert root.status is Status.FAIL and root.id == "diag.unknown"
    assert "raise ValueError('bad layout 7')" in root.summary and "prepare" in root.summary


def test_a_stack_dump_pasted_onto_one_line_ends_nothing() -> None:
    log = '  File "train.py", line 30, in <module>' + " " * 20 + "main()\nstep 10 loss 0.25\n"
    assert all(r.status is not Status.FAIL for r in explain_text(log, "job.log"))


def test_frames_without_a_traceback_header_end_nothing() -> None:
    # traceback.print_stack() and logging's stack_info print frames with no "Traceback" header: no exception.
    log = f"""Stack (most recent call last):
  File "train.py", line 30, in <module>
    main()
  File "{SP}/torch/distributed/distributed_c10d.py", line 4000, in barrier
    work.wait()
step 10 loss 0.25
"""
    assert all(r.status is not Status.FAIL for r in explain_text(log, "job.log"))


def test_an_installed_package_no_rule_knows_is_named_from_its_folder_and_the_logger_prefix_is_read() -> None:
    log = f"""ERROR 03-05 00:25:45 [core.py:1094] Traceback (most recent call last):
ERROR 03-05 00:25:45 [core.py:1094]   File "/work/run.py", line 3, in <module>
ERROR 03-05 00:25:45 [core.py:1094]     client.show()
ERROR 03-05 00:25:45 [core.py:1094]   File "{SP}/visdom/__init__.py", line 711, in _send
ERROR 03-05 00:25:45 [core.py:1094]     return self._handle_post(url, data=data)
ERROR 03-05 00:25:45 [core.py:1094] ConnectionRefusedError: [Errno 111] Connection refused
"""
    root = _root(log)
    assert root.id == "diag.unknown", root.id  # a refused connection outside c10d is not the rendezvous master
    assert root.observed["library"] == "visdom" and "pip show visdom" in root.remedy
    assert root.observed["exception"] == "ConnectionRefusedError"
