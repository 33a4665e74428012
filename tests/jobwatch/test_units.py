"""The pure parts of `ddp-doctor run`: stack parsing, classification, the hang judgement, the env plan."""

from __future__ import annotations

from pathlib import Path

from ddp_doctor.jobwatch import envplan, hang, stacks
from ddp_doctor.jobwatch.balance import WaitShares, straggler
from ddp_doctor.jobwatch.config import WatchConfig
from ddp_doctor.rundir.errorfile import ErrorFile

FH = """Thread 0x00007f0000000002 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 324 in wait
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f0000000001 (most recent call first):
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2800 in all_reduce
  File "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py", line 81 in wrapper
  File "/job/train.py", line 20 in <module>
"""

SPY = """Process 42: python train.py
Python v3.11.2 (/usr/bin/python3.11)

Thread 42 (idle): "MainThread"
    load_batch (/job/train.py:34)
    <module> (/job/train.py:50)
Thread 50 (idle): "ddp-doctor-fr"
    _dump_on_request (/hook/sitecustomize.py:140)
"""


def test_faulthandler_main_thread_is_the_one_not_started_by_threading() -> None:
    frames = stacks.main_frames(FH, "faulthandler")
    assert frames[0].func == "all_reduce" and frames[-1].file == "/job/train.py"
    act = stacks.classify(frames)
    assert act.kind == "collective" and "all_reduce" in act.label
    assert act.frame is not None and act.frame.line == 20


def test_pyspy_main_thread_is_named() -> None:
    frames = stacks.main_frames(SPY, "py-spy")
    assert [f.func for f in frames] == ["load_batch", "<module>"]
    assert stacks.classify(frames).kind == "user"


def test_traceback_phase() -> None:
    tb = 'Traceback (most recent call last):\n  File "/job/train.py", line 3, in <module>\n    dist.init_process_group("nccl")\n  File "/v/site-packages/torch/distributed/distributed_c10d.py", line 9, in init_process_group\n'
    assert stacks.phase_of_traceback(tb) == "init"


def _obs(rank: int, kind: str, cpu: float = 0.0, same: bool = True, seq: int | None = None) -> hang.RankObs:
    frame = stacks.Frame("/job/train.py", 10 + rank, "step")
    return hang.RankObs(rank, stacks.Activity(kind, f"{kind} thing", frame), same, cpu, None, seq, f"x #{seq}")


def test_idle_rank_outside_the_collective_is_behind() -> None:
    j = hang.judge([_obs(0, "collective"), _obs(1, "user", seq=4), _obs(2, "collective", seq=5)], 60)
    assert j.verdict == "hang" and j.kind == "collective" and j.behind == (1,)


def test_busy_rank_outside_the_collective_is_not_a_hang() -> None:
    j = hang.judge([_obs(0, "collective"), _obs(1, "compile", cpu=0.9)], 60)
    assert j.verdict == "busy"


def test_everyone_in_collectives_lagging_sequence_names_the_laggard() -> None:
    j = hang.judge([_obs(0, "collective", seq=9), _obs(1, "collective", seq=8)], 60)
    assert j.verdict == "hang" and j.behind == (1,)


def test_stuck_in_cuda_is_not_a_collective() -> None:
    j = hang.judge([_obs(0, "cuda", cpu=1.0)], 60)
    assert j.verdict == "hang" and j.kind == "cuda" and j.behind == (0,)


def test_loading_data_with_nothing_pending_is_not_a_hang() -> None:
    assert hang.judge([_obs(0, "data"), _obs(1, "data")], 60).verdict == "busy"


def test_env_plan_keeps_what_the_user_set(tmp_path: Path) -> None:
    cfg = WatchConfig(command=("torchrun", "train.py"), run_dir=tmp_path)
    env, items = envplan.plan(cfg, {"NCCL_DEBUG": "INFO", "PYTHONPATH": "/mine", "TORCH_NCCL_TRACE_BUFFER_SIZE": "5"})
    assert env["NCCL_DEBUG"] == "INFO" and "NCCL_DEBUG_FILE" not in env
    assert "TORCH_FR_BUFFER_SIZE" not in env and env["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "5"
    assert env["PYTHONPATH"].split(":") == [envplan.HOOK_DIR, "/mine"]
    states = {i.name: i.state for i in items}
    assert states["NCCL warnings"] == "user" and states["flight recorder"] == "user"
    off = WatchConfig(
        command=("torchrun", "t.py"), run_dir=tmp_path, flight_recorder=False, nccl_debug=False, hook=False
    )
    env2, _ = envplan.plan(off, {})
    assert not any(k.startswith(("TORCH_FR", "NCCL_DEBUG", "DDP_DOCTOR_WATCH")) for k in env2)


def test_python_launch_is_one_rank() -> None:
    assert envplan.is_python_launch(("python3", "train.py"))
    assert not envplan.is_python_launch(("python3", "-m", "torch.distributed.run", "train.py"))
    assert not envplan.is_python_launch(("torchrun", "train.py"))


def test_straggler_needs_a_clear_gap() -> None:
    w = WaitShares()
    for _ in range(10):
        w.add(0, "collective", None)
        w.add(1, "user", "/job/train.py:40 in step")
    s = straggler(w)
    assert s.rank == 1 and s.where == "/job/train.py:40 in step"
    even = WaitShares()
    for i in range(10):
        even.add(0, "collective" if i % 2 else "user", None)
        even.add(1, "collective" if i % 2 else "user", None)
    assert straggler(even).rank is None


def test_compiling_rank_waiting_for_its_compiler_is_not_hung() -> None:
    # Seen for real: rank 1 in inductor's _run_compile_cmd (waiting on gcc, no CPU of its own, same stack).
    j = hang.judge([_obs(0, "collective"), _obs(1, "compile", cpu=0.0, same=True)], 60)
    assert j.verdict == "busy"


# py-spy 0.4's stderr when the seccomp filter of tests/jobwatch/noptrace.py refuses its ptrace attach (RUST_BACKTRACE=1).
PYSPY_REFUSED = """Error: Failed to get stack traces

Caused by:
    0: Failed to suspend process
    1: EPERM: Operation not permitted
    2: EPERM: Operation not permitted

Stack backtrace:
   0: <E as anyhow::context::ext::StdError>::ext_context
   1: py_spy::python_spy::PythonSpy::get_stack_traces
"""


def test_py_spy_refusal_is_one_line_and_a_kernel_refusal() -> None:
    why = stacks.pyspy_error(PYSPY_REFUSED)
    assert why == "Failed to get stack traces: Failed to suspend process: EPERM: Operation not permitted"
    assert stacks.refused_by_kernel(f"py-spy failed (exit 1): {why}")
    assert not stacks.refused_by_kernel("py-spy failed (exit 1): Failed to find python version from target process")
    assert not stacks.refused_by_kernel("py-spy is not installed")


def test_a_rank_s_multi_line_error_is_named_by_its_exception_line_and_its_own_signature() -> None:
    from ddp_doctor.jobwatch import results

    # What torch 2.13 raises at torch.cuda.set_device(1) with one GPU (the message as @record stores it).
    message = (
        "AcceleratorError: CUDA error: invalid device ordinal\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    )
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/job/train.py", line 3, in <module>\n'
        "    torch.cuda.set_device(local)\n"
        '  File "/v/lib/python3.12/site-packages/torch/cuda/__init__.py", line 567, in set_device\n'
        "    torch._C._cuda_setDevice(device)\n"
        f"torch.AcceleratorError: {message.split(': ', 1)[1]}"
    )
    error = ErrorFile.from_object(
        {"message": {"message": message, "extraInfo": {"py_callstack": tb, "timestamp": "17"}}}
    )
    line = error.headline
    assert (error.traceback, error.timestamp) == (tb, 17.0)
    assert line == "AcceleratorError: CUDA error: invalid device ordinal"
    found = results._signature_of(1, [], [line, *tb.splitlines()])
    assert found is not None and found.id == "diag.invalid_device_ordinal"


def _frames(*spec: tuple[str, str]) -> tuple[stacks.Frame, ...]:
    return tuple(stacks.Frame(file, 1, func) for file, func in spec)


def test_an_import_is_part_of_what_asked_for_it() -> None:
    # torch.compile imports inductor lazily: a sample taken inside that import is compiling, not "importing modules"
    # (a CI run sampled rank 1 there and the quiet rank was called an importer).
    site = "/venv/lib/python3.12/site-packages/torch"
    inside_compile = _frames(
        ("<frozen importlib._bootstrap>", "_call_with_frames_removed"),
        (f"{site}/_inductor/codegen/cpp.py", "<module>"),
        ("<frozen importlib._bootstrap>", "_find_and_load"),
        (f"{site}/_dynamo/eval_frame.py", "__call__"),
        ("/job/train.py", "slow_compile"),
        ("/job/train.py", "<module>"),
    )
    act = stacks.classify(inside_compile)
    assert act.kind == "compile" and "compiling" in act.label and "importing" in act.label, act
    first_call = _frames(
        ("<frozen importlib._bootstrap>", "_find_and_load"), (f"{site}/__init__.py", "compile"), ("/job/train.py", "f")
    )
    assert stacks.classify(first_call).kind == "compile"
    plain = _frames(("<frozen importlib._bootstrap>", "_find_and_load"), ("/job/train.py", "<module>"))
    assert stacks.classify(plain).kind == "import" and stacks.classify(plain).label == "importing modules"
