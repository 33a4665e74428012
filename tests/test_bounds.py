"""Bounds before work: every numeric flag is refused at parse time when it is not a finite number in
its range (one line naming the range, exit 2), rank counts are bounded by the machine, and outputs,
plot backends and baselines are checked before any rank starts."""

from __future__ import annotations

import argparse
import os
import resource
from pathlib import Path

import pytest

from ddp_doctor.cli import COMMANDS, build_parser
from ddp_doctor.commands.options import Number, Size
from ddp_doctor.errors import UsageError
from ddp_doctor.live import capacity
from tests.conftest import run_cli

BAD_NUMBERS = [
    ("check", "--timeout", "nan"),
    ("check", "--timeout", "inf"),
    ("check", "--timeout", "-1"),
    ("check", "--timeout", "0"),
    ("check", "--batch-mb", "1000000"),
    ("check", "--batch-mb", "0"),
    ("check", "--nproc", "100000"),
    ("check", "--nproc", "0"),
    ("check", "--expect-gpus", "-1"),
    ("check", "--master-port", "70000"),
    ("check", "--dataloader-workers", "-1"),
    ("check", "--dataloader-workers", "100000"),
    ("check", "--join-timeout", "inf"),
    ("check", "--node-rank", "-1"),
    ("bench", "--timeout", "nan"),
    ("bench", "--iters", "0"),
    ("bench", "--warmup-iters", "-1"),
    ("bench", "--min-bytes", "0"),
    ("bench", "--max-bytes", "1T"),
    ("bench", "--max-regression", "100"),
    ("bench", "--min-busbw", "nan"),
    ("bench", "--nproc", "100000"),
    ("image", "--max-bytes", "inf"),
    ("image", "--max-entry-bytes", "0"),
    ("image", "--max-entries", "0"),
    ("run", "--hang-after", "nan"),
    ("run", "--hang-after", "0"),
    ("run", "--hang-floor", "0"),
    ("run", "--hang-k", "0.5"),
    ("run", "--hang-k", "inf"),
    ("run", "--sample-hz", "-1"),
    ("run", "--sample-hz", "1e9"),
    ("run", "--stack-sample", "inf"),
    ("run", "--nnodes", "0"),
    ("run", "--node-rank", "-1"),
    ("run", "--gather-timeout", "nan"),
]
_POSITIONAL = {"image": ["rootfs"], "run": ["--", "true"]}


@pytest.mark.parametrize(("command", "flag", "value"), BAD_NUMBERS)
def test_a_bad_number_is_one_line_naming_the_range(command: str, flag: str, value: str, tmp_path: Path) -> None:
    args = [command, f"{flag}={value}"]
    if command == "run":
        args += ["--run-dir", str(tmp_path / "run")]
    proc = run_cli(*args, *_POSITIONAL.get(command, []), console=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ddp-doctor: error: argument {flag}: got {value!r}; expected")
    assert "<=" in lines[0] or " to " in lines[0], lines[0]  # the range is in the message
    assert not (tmp_path / "run").exists() and proc.stdout == ""


# launch's numbers are validated once for flags and --spec YAML alike, by deploy/spec.build.
_VALIDATED_ELSEWHERE = {"launch"}


def test_every_numeric_flag_of_every_command_has_a_bounded_type() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    unbounded = []
    for name in COMMANDS:
        if name in _VALIDATED_ELSEWHERE:
            continue
        for action in commands.choices[name]._actions:
            numeric = action.type in (int, float) or _numeric(action.default)
            if numeric and not isinstance(action.type, (Number, Size)):
                unbounded.append(f"{name} {action.option_strings}")
    assert unbounded == []


def _numeric(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def test_a_hundred_thousand_ranks_is_refused_before_anything_starts(tmp_path: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = run_cli("check", "--nproc", "100000", console=True, env={"TMPDIR": str(tmp_path)}, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 2 and "argument --nproc: got '100000'" in proc.stderr
    # CPU seconds, not wall time: a loaded machine delays the start, never the work done
    assert (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime) < 2.0
    assert list(tmp_path.iterdir()) == []


def test_more_gloo_ranks_than_cores_needs_oversubscribe() -> None:
    cores = len(os.sched_getaffinity(0))
    proc = run_cli("check", "--backend", "gloo", "--nproc", str(cores + 1), console=True, timeout=120)
    assert proc.returncode == 2
    expected = (
        f"ddp-doctor: error: --nproc {cores + 1}: {cores} CPU core{'s' if cores != 1 else ''} here (CPU affinity), "
        "and gloo ranks past one per core share them and slow every phase; "
        f"pass --nproc {cores} or fewer, or --oversubscribe to run them anyway"
    )
    assert proc.stderr.strip().splitlines() == [expected]


def test_oversubscribe_is_still_bounded_by_memory() -> None:
    proc = run_cli("check", "--backend", "gloo", "--nproc", "4000", "--oversubscribe", console=True, timeout=120)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert "--nproc 4000 needs about" in line and "measured: knowledge/rank_memory.yaml" in line
    assert "300 MiB a rank" in line and "is available (" in line and "pass --nproc" in line


def test_the_memory_bound_names_what_fits() -> None:
    machine = capacity.Machine(cores=64, cores_from="test", memory_bytes=4 << 30, memory_from="a 4 GiB test machine")
    memory = capacity.for_check(dataloader_workers=2, batch_mb=32)
    capacity.refuse_beyond(7, "gloo", 0, False, memory, machine)  # 220 MiB + 7 x 540 MiB fit in 4 GiB
    with pytest.raises(UsageError, match=r"--nproc 8 needs about 4.4 GiB .* pass --nproc 7 or fewer") as refused:
        capacity.refuse_beyond(8, "gloo", 0, True, memory, machine)
    assert "a 4 GiB test machine" in str(refused.value)
    with pytest.raises(UsageError, match="NCCL takes one GPU per rank and 1 GPU is visible"):
        capacity.refuse_beyond(2, "nccl", 1, False, memory, machine)
    capacity.refuse_beyond(2, "nccl", 1, True, memory, machine)  # --oversubscribe: NCCL itself will say


def test_an_output_in_a_missing_directory_is_refused_before_the_chain(tmp_path: Path) -> None:
    proc = run_cli("check", "-o", str(tmp_path / "missing" / "x.json"), console=True, env={"TMPDIR": str(tmp_path)})
    assert proc.returncode == 2
    expected = f"ddp-doctor: error: cannot write --output {tmp_path}/missing/x.json: the directory {tmp_path}/missing does not exist"
    assert proc.stderr.strip().splitlines() == [expected]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no run directory was made


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("-o", "{tmp}/missing/x.json"), "the directory {tmp}/missing does not exist"),
        (("--plot", "{tmp}/missing/x.png"), "--plot {tmp}/missing/x.png: the directory {tmp}/missing does not exist"),
        (("--plot", "{tmp}/x.gif"), "the file name must end in .png or .svg"),
        (("--baseline", "{tmp}/nothing.json"), "cannot read baseline {tmp}/nothing.json"),
    ],
)
def test_bench_checks_outputs_and_baseline_before_the_sweep(
    tmp_path: Path, flags: tuple[str, ...], message: str
) -> None:
    args = [f.format(tmp=tmp_path) for f in flags]
    proc = run_cli("bench", *args, console=True, env={"TMPDIR": str(tmp_path)}, timeout=60)
    assert proc.returncode == 2 and message.format(tmp=tmp_path) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("ddp-doctor-run-")]  # no rank started


def test_plot_without_matplotlib_is_refused_before_the_sweep(tmp_path: Path) -> None:
    # A directory on PYTHONPATH whose matplotlib cannot be found: find_spec sees None.
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'matplotlib' or name.startswith('matplotlib.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    proc = run_cli(
        "bench", "--plot", str(tmp_path / "x.png"), console=True, env={"PYTHONPATH": str(hide), "TMPDIR": str(tmp_path)}
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "ddp-doctor: error: --plot needs matplotlib: pip install 'ddp-doctor[plot]' (or pip install matplotlib)"
    ]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("ddp-doctor-run-")]


@pytest.mark.parametrize(
    ("layout", "stat_key"),
    [
        ({"memory.max": "1073741824", "memory.current": "943718400"}, "inactive_file"),
        ({"memory.limit_in_bytes": "1073741824", "memory.usage_in_bytes": "943718400"}, "total_inactive_file"),
    ],
)
def test_page_cache_a_cgroup_can_drop_is_room(tmp_path: Path, layout: dict[str, str], stat_key: str) -> None:
    # 1 GiB limit, 900 MiB used of which 700 MiB are inactive file pages: 824 MiB of room, not 124 MiB.
    for name, value in layout.items():
        (tmp_path / name).write_text(value + "\n")
    (tmp_path / "memory.stat").write_text(f"anon 1\nfile 2\n{stat_key} {700 << 20}\nactive_file 3\n")
    assert capacity.cgroup_room(tmp_path, tmp_path) == (1024 - 900 + 700) << 20
    (tmp_path / "memory.stat").unlink()  # unreadable stat: the plain difference, never more
    assert capacity.cgroup_room(tmp_path, tmp_path) == (1024 - 900) << 20
