"""A process that ended badly is never called healthy, signature or not; a stale C++ extension lock is a hang.

The extension tests run the real torch.utils.cpp_extension.load in a child process against a build directory
whose lock file an interrupted build left behind: torch names the extensions root and then waits on the lock
for ever. The child is stopped once it has printed that line; what it printed is what explain reads.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ddp_doctor.diagnose import explain_text, readers
from ddp_doctor.report import Result, Status

# Each line written as its producer prints it (the source is named in readers.yaml ends_badly); alone in a log.
ENDED_BADLY = [
    # torch's c10::Error backtrace without its message (the paste starts at the frames)
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f1 in /env/lib/python3.11/site-packages/torch/lib/libc10.so)",
    "Exception raised from operator() at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521 (most recent call first):",
    # libstdc++'s verbose terminate handler
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    # a traceback's last source line, alone
    "    raise RuntimeError(f'shard {idx} is missing')",
    "raise torch.distributed.DistStoreError('timed out')",
]
NOT_AN_ENDING = [
    "INFO: will raise the learning rate after warm-up",
    "    warnings.warn('Exception raised from a callback is ignored')",
]


def _results(lines: list[str]) -> list[Result]:
    return explain_text(("\n".join(lines) + "\n").encode(), "log")


@pytest.mark.parametrize("line", ENDED_BADLY)
def test_a_line_showing_a_process_ending_badly_is_a_fail(line: str) -> None:
    results = _results(["step 10 loss 2.31", line])
    assert any(r.status is Status.FAIL for r in results), [(r.id, r.status) for r in results]


LAUNCHERS = [rule for rule in readers.load().ends_badly if rule.launcher]


@pytest.mark.parametrize("rule", LAUNCHERS, ids=[f"{r.launcher}: {r.says}" for r in LAUNCHERS])
def test_a_launcher_s_failure_summary_is_a_fail(rule: readers.EndsBadly) -> None:
    """Every row of readers.yaml ends_badly.launchers: its source named, its example recognised and a FAIL."""
    assert rule.source.startswith("https://"), rule.launcher
    assert rule.pattern.search(rule.example), rule.example
    results = _results(["step 10 loss 2.31", rule.example])
    assert any(r.status is Status.FAIL for r in results), [(r.id, r.status) for r in results]


def test_a_launcher_s_success_lines_are_not_an_ending() -> None:
    results = _results(
        [
            "Process 4242 exits successfully.",  # deepspeed/launcher/launch.py
            "pytorchjob-worker-0   0/1     Completed   0          3m",  # kubectl get pods
            "      Exit Code:    0",  # kubectl describe pod
            "[INFO] process 1 terminated with exit code 0",
        ]
    )
    assert not any(r.status is Status.FAIL for r in results), [(r.id, r.summary) for r in results]


def test_a_warning_of_a_cause_is_named_when_a_launcher_says_the_command_failed() -> None:
    export = "bash: line 1: export: `MY-VAR=1': not a valid identifier"
    summary = "pdsh@node-0: node-1: ssh exited with exit code 1"
    results = _results([export, summary])
    unknown = next(r for r in results if r.id == "diag.unknown")
    assert unknown.status is Status.FAIL and unknown.observed["may_be_why"] == "diag.shell_export_refused"
    assert "diag.unknown" not in {r.id for r in _results(["step 10 loss 2.31", export])}
    alone = next(r for r in _results(["step 10 loss 2.31", summary]) if r.id == "diag.unknown")
    assert "may_be_why" not in alone.observed


@pytest.mark.parametrize("line", NOT_AN_ENDING)
def test_words_alone_are_not_an_ending(line: str) -> None:
    results = _results(["step 10 loss 2.31", line])
    assert not any(r.status is Status.FAIL for r in results), [(r.id, r.summary) for r in results]


PROBE = textwrap.dedent(
    """
    import logging, os, sys
    import torch.utils.cpp_extension as ext
    # verbose=True logs at INFO through torch's own handler (as DeepSpeed's op builder runs it)
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.INFO)
    root, name, source = sys.argv[1], "ddp_doctor_lock_probe", sys.argv[2]
    lock = os.path.join(root, name, "lock")
    if sys.argv[3] == "warn" and os.path.exists(lock):  # as NVlabs' plugin loaders warn before loading
        print("Warning: Lock file exists in build directory: '%s'" % lock, flush=True)
    ext.load(name=name, sources=[source], verbose=True)
    print("loaded", flush=True)
    """
)


def _waiting_output(tmp_path: Path, mode: str) -> str:
    """What a real process prints before it waits on a stale build lock (it is stopped once it has said so)."""
    root = tmp_path / "torch_extensions"
    (root / "ddp_doctor_lock_probe").mkdir(parents=True)
    (root / "ddp_doctor_lock_probe" / "lock").write_text("")  # left by a build that was interrupted
    source = tmp_path / "probe.cpp"
    source.write_text("int probe() { return 1; }\n")
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(root), str(source), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TORCH_EXTENSIONS_DIR": str(root)},
    )
    assert proc.stdout is not None
    out = b""
    deadline = time.monotonic() + 120
    try:
        while b"extensions root..." not in out and proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if ready:
                out += os.read(proc.stdout.fileno(), 65536)
    finally:
        proc.kill()
        rest, _ = proc.communicate(timeout=30)
    out += rest
    text = out.decode()
    assert "extensions root..." in text and "loaded" not in text, text
    return text


def test_a_real_wait_on_a_stale_extension_lock_is_a_hang_to_check(tmp_path: Path) -> None:
    # Every process prints the extensions root and then nothing: a hang on the lock if the job stopped there; a
    # paste of only the start of a run looks the same, so a warning naming the lock's remedy.
    text = _waiting_output(tmp_path, "quiet")
    hang = next(r for r in explain_text((text + text).encode(), "log") if r.id == "diag.hang")
    assert hang.status is Status.WARN and hang.observed["stage"] == "extension_build", hang.summary
    assert "lock" in hang.remedy and "torch_extensions" in hang.remedy


def test_a_real_wait_after_the_lock_file_was_reported_is_a_fail(tmp_path: Path) -> None:
    text = _waiting_output(tmp_path, "warn")
    results = explain_text(text.encode(), "log")
    assert results[0].id == "diag.hang" and results[0].status is Status.FAIL, [(r.id, r.status) for r in results]
    assert results[0].observed["stage"] == "extension_build"
    assert "C++/CUDA extension" in results[0].title


def test_an_extension_that_goes_on_to_load_is_not_a_hang() -> None:
    lines = [
        "Using /root/.cache/torch_extensions/py310_cu121 as PyTorch extensions root...",
        "Warning: Lock file exists in build directory: '/root/.cache/torch_extensions/py310_cu121/fused_adam/lock'",
        "Using /root/.cache/torch_extensions/py310_cu121 as PyTorch extensions root...",
        "Loading extension module fused_adam...",
        "Time to load fused_adam op: 0.39 seconds",
    ]
    results = _results(lines)
    assert not any(r.id == "diag.hang" or r.status is Status.FAIL for r in results), [(r.id, r.status) for r in results]


def test_ray_tune_s_failed_trials_are_a_fail() -> None:
    # ray/tune/tune.py logs (or raises TuneError with) this when trials errored
    line = "2024-03-01 10:00:00,000\tERROR tune.py:1035 -- Trials did not complete: [TorchTrainer_1a2b3_00000]"
    assert any(r.status is Status.FAIL for r in _results(["Trial TorchTrainer_1a2b3_00000 started", line]))
