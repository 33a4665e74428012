"""How often asking a busy rank for its stack breaks it: the hook's thread (what `ddp-doctor run` does) against
faulthandler on SIGURG (what it did), each while a torch process imports, starts gloo and builds a DDP model.

    .venv/bin/python benchmarks/stress_stack_sampling.py [--runs 20] [--every-ms 3]

Each run starts one such process under the startup hook and asks for its stack every --every-ms until it exits;
a run that does not print "ok" (a crash, an exception) is broken. The signal is the yardstick, in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from ddp_doctor.jobwatch import envplan
from ddp_doctor.jobwatch.hook import ddp_doctor_heartbeat as rankfiles

JOB = """import os, torch, torch.distributed as dist
dist.init_process_group("gloo", rank=0, world_size=1, init_method="file://" + os.path.join(os.environ["DDP_DOCTOR_WATCH_DIR"], "store"))
torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
dist.destroy_process_group()
print("ok")
"""


def one_run(method: str, every_s: float) -> tuple[bool, str]:
    """(whether the job survived, the end of its output)."""
    run_dir = tempfile.mkdtemp(prefix="ddp-doctor-stress-")
    try:
        env = {**os.environ, "PYTHONPATH": envplan.HOOK_DIR, "DDP_DOCTOR_WATCH_DIR": run_dir}
        env["DDP_DOCTOR_WATCH_LONE"] = "1"
        env.pop("RANK", None)
        proc = subprocess.Popen([sys.executable, "-c", JOB], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        n = 0
        while proc.poll() is None and time.monotonic() < deadline:
            n += 1
            if method == "thread":
                rankfiles.ask_for_stacks(run_dir, f"stress-{n}")
            else:
                try:
                    os.kill(proc.pid, signal.SIGURG)
                except ProcessLookupError:
                    break
            time.sleep(every_s)
        if proc.poll() is None:
            proc.kill()
        out = proc.communicate(timeout=60)[0].decode(errors="replace")
        return "ok" in out.split(), f"exit {proc.returncode}: {out.strip()[-160:]}"
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--every-ms", type=float, default=3.0)
    args = ap.parse_args()
    for method in ("thread", "signal"):
        broken = []
        for _ in range(args.runs):
            ok, why = one_run(method, args.every_ms / 1000)
            if not ok:
                broken.append(why)
        words = "the hook's thread (ddp-doctor run)" if method == "thread" else "SIGURG to faulthandler (yardstick)"
        print(f"{words}: {len(broken)} of {args.runs} runs broken")
        for why in broken[:3]:
            print(f"  {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
