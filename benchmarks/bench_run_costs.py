"""What each thing `ddp-doctor run` adds inside a rank costs, one at a time, against the same thing without it.

    python benchmarks/bench_run_costs.py [--reps 5] [--step-ms 10]

bench_run_overhead.py times a whole training loop with and without the doctor; on a machine shared
with other work its run-to-run noise (tens of percent) hides anything near 1 %. This script measures
each addition where it happens, many times over, in one process (or a one-rank gloo group), with the
yardstick interleaved in the same script, and turns it into a share of a step of --step-ms:

- output capture: one print through the hook's tee (the stream, plus os.write to rank-N.log) vs the
  plain stream, per line; cost per step = per line x lines per step (--lines-per-step);
- stack sampling: one faulthandler dump of every thread on SIGURG into rank-N.stack (what the doctor
  asks once a second), per dump; cost per step = per dump x step / 1 s;
- the heartbeat: one tick of the hook's heartbeat thread (each process group's sequence number read, and
  hb-rank-N.json written, as when it moved every tick) in a one-rank gloo group, CPU per tick (and wall);
  cost per step = CPU per tick x 2 ticks a second x step;
- the flight recorder: one gloo all_reduce with TORCH_FR_BUFFER_SIZE=2000 vs 0 (two one-rank groups
  in subprocesses, alternated); torch >= 2.6 records by default, so a bare job already pays it and the
  doctor's 2000 adds nothing there; cost per step = per collective x --collectives-per-step.

The medians over --reps alternated repetitions are compared; each line prints the yardstick, the
measured thing, the difference and its share of a step.
"""

from __future__ import annotations

import argparse
import faulthandler
import io
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FR_LOOP = r"""
import os, sys, time, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
x = torch.ones(1024)
n = int(sys.argv[1])
for _ in range(200):
    dist.all_reduce(x)
t0 = time.perf_counter()
for _ in range(n):
    dist.all_reduce(x)
print(f"US_PER_OP {(time.perf_counter() - t0) / n * 1e6:.3f}", flush=True)
dist.destroy_process_group()
"""

HB_LOOP = r"""
import os, sys, time, torch, torch.distributed as dist
sys.path.insert(0, sys.argv[3])
import ddp_doctor_heartbeat as heartbeat
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
dist.new_group([0])
n = int(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(n):
    heartbeat.write(sys.argv[4], heartbeat.of_this_process(dist, 0, os.getpid(), time.time()))
print(f"US_PER_TICK {(time.process_time() - c0) / n * 1e6:.3f} {(time.perf_counter() - t0) / n * 1e6:.3f}", flush=True)
dist.destroy_process_group()
"""
HOOK_DIR = Path(__file__).resolve().parents[1] / "src" / "ddp_doctor" / "jobwatch" / "hook"


def _tee_us(lines: int, log: str) -> tuple[float, float]:
    """(plain, tee'd) microseconds per print of a 60-character line into an in-memory stream."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    class Tee:
        def __init__(self, stream: io.StringIO) -> None:
            self.stream = stream

        def write(self, text: str) -> int:
            n = self.stream.write(text)
            os.write(fd, text.encode("utf-8", "replace"))
            return n

        def flush(self) -> None:
            self.stream.flush()

    line = "rank 0 step 123 loss 0.1234 lr 0.0003 tokens/s 123456.7 ok"
    out = []
    for stream in (io.StringIO(), Tee(io.StringIO())):
        t0 = time.perf_counter()
        for _ in range(lines):
            print(line, file=stream, flush=True)  # type: ignore[arg-type]
        out.append((time.perf_counter() - t0) / lines * 1e6)
    os.close(fd)
    return out[0], out[1]


def _dump_us(dumps: int, stack_file: str) -> float:
    """Microseconds per SIGURG faulthandler dump of every thread (the hook's registration), signal included."""
    with open(stack_file, "a") as f:
        faulthandler.register(signal.SIGURG, file=f, all_threads=True, chain=False)
        try:
            t0 = time.perf_counter()
            for _ in range(dumps):
                os.kill(os.getpid(), signal.SIGURG)
            return (time.perf_counter() - t0) / dumps * 1e6
        finally:
            faulthandler.unregister(signal.SIGURG)


def _fr_us(buffer: str, ops: int, port: int) -> float:
    env = {**os.environ, "TORCH_FR_BUFFER_SIZE": buffer, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", FR_LOOP, str(ops), str(port)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    for line in done.stdout.splitlines():
        if line.startswith("US_PER_OP"):
            return float(line.split()[1])
    raise SystemExit(f"the flight-recorder loop failed: {done.stderr[-2000:]}")


def _heartbeat_us(ticks: int, port: int, run_dir: str) -> tuple[float, float]:
    """(CPU, wall) microseconds per tick: the thread holds a core (and now and then the GIL) for the CPU part;
    the rest is waiting on the filesystem (the rename), with the GIL released."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, "-c", HB_LOOP, str(ticks), str(port), str(HOOK_DIR), run_dir]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("US_PER_TICK"):
            return float(line.split()[1]), float(line.split()[2])
    raise SystemExit(f"the heartbeat loop failed: {done.stderr[-2000:]}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--step-ms", type=float, default=10.0, help="the step the costs are a share of (10 ms)")
    parser.add_argument("--lines-per-step", type=float, default=1.0, help="prints per step (1: a log line each step)")
    parser.add_argument("--collectives-per-step", type=float, default=2.0, help="DDP: about one per gradient bucket")
    parser.add_argument("--ops", type=int, default=5000)
    args = parser.parse_args()
    step_us = args.step_ms * 1000
    plain, tee, dumps, fr_on, fr_off, beats, beats_wall = [], [], [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="ddp-doctor-bench-costs-") as tmp:
        for _ in range(args.reps):
            p, t = _tee_us(20000, str(Path(tmp) / "rank-0.log"))
            plain.append(p)
            tee.append(t)
            dumps.append(_dump_us(2000, str(Path(tmp) / "rank-0.stack")))
            cpu, wall = _heartbeat_us(2000, _free_port(), tmp)
            beats.append(cpu)
            beats_wall.append(wall)
            for sink, buf in (
                ((fr_on, "2000"), (fr_off, "0")) if len(fr_on) % 2 == 0 else ((fr_off, "0"), (fr_on, "2000"))
            ):
                sink.append(_fr_us(buf, args.ops, _free_port()))
    med = statistics.median
    tee_cost = (med(tee) - med(plain)) * args.lines_per_step
    dump_cost = med(dumps) * (step_us / 1e6)  # one dump per second of steps
    fr_cost = (med(fr_on) - med(fr_off)) * args.collectives_per_step
    beat_cost = med(beats) * 2 * (step_us / 1e6)  # two ticks a second
    print(f"step {args.step_ms:g} ms; medians of {args.reps} alternated repetitions")
    print(
        f"output capture: print {med(plain):.2f} us plain, {med(tee):.2f} us through the tee; "
        f"{args.lines_per_step:g} line(s)/step -> {tee_cost:.2f} us/step = {100 * tee_cost / step_us:.4f}% of a step"
    )
    print(
        f"stack sampling: {med(dumps):.1f} us per faulthandler dump, one per second -> {dump_cost:.2f} us/step "
        f"= {100 * dump_cost / step_us:.4f}% of a step"
    )
    print(
        f"heartbeat: {med(beats):.1f} us CPU per tick ({med(beats_wall):.1f} us wall, the rest waiting on the "
        "filesystem with the GIL released; sequence numbers of 2 process groups read, hb-rank-N.json written), "
        f"two a second -> {beat_cost:.2f} us/step = {100 * beat_cost / step_us:.4f}% of a step"
    )
    print(
        f"flight recorder (torch's own default since 2.6; the doctor's TORCH_FR_BUFFER_SIZE=2000 is the same): "
        f"all_reduce {med(fr_off):.2f} us with it off, {med(fr_on):.2f} us on; "
        f"{args.collectives_per_step:g} collective(s)/step -> {fr_cost:.2f} us/step = {100 * fr_cost / step_us:.4f}% "
        "of a step (paid by the bare job as well on torch >= 2.6)"
    )
    added = tee_cost + dump_cost + beat_cost
    print(
        f"added by the doctor inside a rank (capture + sampling + heartbeat): {100 * added / step_us:.4f}% of a {args.step_ms:g} ms step"
    )
    return 0 if added / step_us < 0.01 else 1


if __name__ == "__main__":
    raise SystemExit(main())
