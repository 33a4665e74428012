"""`ddp-doctor launch --target slurm` scripts, submitted with sbatch to the real two-node Slurm as written.

The submitting-environment mode runs for real (the venv of this checkout, found through VIRTUAL_ENV);
pyxis and Apptainer are not packaged here, so their scripts are checked by `bash -n` and `ddp-doctor lint`
(tests/deploy/test_launch_slurm.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ddp_doctor.rundir.records import Heartbeat
from tests.conftest import DOCTOR
from tests.jobwatch.runner import JOB
from tests.slurm.cluster import JobEnd, Slurm

pytestmark = [pytest.mark.root, pytest.mark.slow]

JOB_S = 90
"""Deadline for one job of ddp-doctor check on both nodes (about 12 s on an idle 2-core machine)."""
VENV = str(Path(sys.executable).parent.parent)


def generate(job_dir: Path, *flags: str) -> Path:
    """The installed console script writes the sbatch script, as a user in this venv would."""
    env = {**os.environ, "VIRTUAL_ENV": VENV}
    env.pop("CONDA_PREFIX", None)
    r = subprocess.run(
        [str(DOCTOR), "launch", "--target", "slurm", "--nodes", "2", "--gpus-per-node", "0", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    script = job_dir / "doctor.sbatch"
    script.write_text(r.stdout)
    return script


def flat(text: str) -> str:
    """The report with every run of whitespace one space: a summary wraps under its column (the text is
    laid out for 100 columns when piped), so a phrase may span lines."""
    return re.sub(r"\s+", " ", text)


def submit(slurm: Slurm, script: Path, deadline_s: float = JOB_S, **env: str) -> tuple[JobEnd, str, float]:
    started = time.monotonic()
    job = slurm.sbatch(script, env=env)
    end = slurm.wait(job, deadline_s)
    took = time.monotonic() - started
    return end, (script.parent / f"ddp-doctor-{job}.out").read_text(), took


def _worker_phase(slurm: Slurm, node: int) -> str | None:
    """The phase a rank on `node` is in, from its heartbeat file in the check's run directory."""
    for pid in slurm.net.pids_of(slurm.hosts[node]):
        try:
            proc = psutil.Process(pid)
            if "ddp_doctor.live.worker" not in " ".join(proc.cmdline()):
                continue
            env = proc.environ()
            beat = Heartbeat.from_json(Path(env["DDP_DOCTOR_RUN_DIR"], f"rank-{env['RANK']}.hb").read_text())
            return beat.phase
        except (psutil.Error, OSError, KeyError, ValueError):
            continue
    return None


def test_the_script_passes_on_both_nodes_with_one_cluster_report(slurm: Slurm, job_dir: Path) -> None:
    script = generate(job_dir, "--preflight")
    assert f"source {VENV}/bin/activate" in script.read_text()
    end, out, took = submit(slurm, script)
    assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), out[-3000:]
    # One cluster report in the job output, from node 0; node 1's own report is a file in ./logs.
    assert out.count("ddp-doctor check — host node0") == 1 and "ddp-doctor check — host node1" not in out
    assert "4 gloo ranks on 2 nodes ran init_process_group" in out
    assert re.search(r"multinode\.joined +2 of 2 nodes joined", out)
    assert re.search(r"multinode\.interfaces node 0 \(node0\): eth0 .*node 1 \(node1\): eth0", flat(out)), out[-4000:]
    node1 = (job_dir / "logs" / f"ddp-doctor-check-{end.job_id}-node1.txt").read_text()
    assert "ddp-doctor check — host node1" in node1
    # The preflight ran on each node first and says what it cost.
    assert out.index("node1: preflight ddp-doctor check --static exited 0") < out.index("ddp-doctor check — host node0")
    assert "node0: preflight ddp-doctor check --static exited 0" in out
    cost = int(re.search(r"preflight passed on every node in (\d+) s", out).group(1))  # type: ignore[union-attr]
    assert cost < 60
    print(f"job {took:.1f} s, of which the preflight {cost} s")
    assert slurm.jobcomp(end.job_id)["JobState"] == "COMPLETED"


def test_a_killed_rank_is_named_with_its_node(slurm: Slurm, job_dir: Path) -> None:
    script = generate(job_dir)
    end, out, _ = submit(slurm, script, DDP_DOCTOR_FAULT="rank=3,phase=collectives,action=kill")
    assert (end.state, end.exit_code) == ("FAILED", "1:0"), out[-3000:]
    # Node 0 saw its ranks lose node1; node1's own report names the rank and how it ended.
    assert "ddp-doctor check — host node0" in out and "root cause: multinode.peer_failed" in out, out[-4000:]
    assert re.search(r"multinode\.peer_failed this node's ranks lost their connection to node1 \(", flat(out)), out[
        -4000:
    ]
    node1 = (job_dir / "logs" / f"ddp-doctor-check-{end.job_id}-node1.txt").read_text()
    assert "root cause: live.collectives" in node1
    assert re.search(r"live\.collectives .*rank 3 stopped in collectives: killed by SIGKILL", flat(node1)), node1


def test_a_node_that_dies_mid_job_is_named(slurm: Slurm, job_dir: Path) -> None:
    script = generate(job_dir)
    job = slurm.sbatch(script)
    end_by = time.monotonic() + JOB_S
    phase = None
    while time.monotonic() < end_by:
        phase = _worker_phase(slurm, 1)
        if phase in ("collectives", "dataloader", "sampler", "ddp"):
            break
        time.sleep(0.1)
    assert phase in ("collectives", "dataloader", "sampler", "ddp"), f"node1's ranks never got past init: {phase}"
    slurm.power_off(slurm.hosts[1])  # node1 dies: slurmd, its job steps and ranks at once, then its link
    end = slurm.wait(job, JOB_S)
    out = (job_dir / f"ddp-doctor-{job}.out").read_text()
    assert end.state == "FAILED", (end, out[-3000:])
    assert "ddp-doctor check — host node0" in out and "verdict: FAIL" in out
    root = re.search(r"root cause: (\S+)", out)
    assert root and root.group(1) in ("multinode.peer_failed", "multinode.link_lost"), out[-4000:]
    assert re.search(rf"{re.escape(root.group(1))} .*node1 \(", flat(out)), out[-4000:]


def test_a_failed_preflight_ends_the_job_with_its_reason(slurm: Slurm, job_dir: Path) -> None:
    script = generate(job_dir, "--preflight", "--env", "GLOO_SOCKET_IFNAME=ens9")
    end, out, took = submit(slurm, script)
    assert (end.state, end.exit_code) == ("FAILED", "1:0"), out[-3000:]
    assert took < 60
    for node in ("node0", "node1"):
        own = flat(
            "\n".join(line.removeprefix(f"{node}: ") for line in out.splitlines() if line.startswith(f"{node}: "))
        )
        assert re.search(r"✘ FAIL env\.env_vars GLOO_SOCKET_IFNAME=ens9 matches no interface", own), out
        assert f"{node}: preflight ddp-doctor check --static exited 1" in out
    assert "ddp-doctor preflight failed (exit 1): the job's own step did not start" in out
    assert "live.launch" not in out  # the check across nodes never started


@pytest.mark.parametrize("mode", ["healthy", "raise"])
def test_a_watched_script_gives_one_report_naming_the_failing_node_and_rank(
    slurm: Slurm, job_dir: Path, mode: str
) -> None:
    # launch --watch: the script runs under `ddp-doctor run --exit-code verdict`, which finds its nodes in Slurm's
    # variables; no --nnodes, --node-rank or --gather anywhere in the generated script.
    shutil.copy(JOB, job_dir / "train.py")
    script = generate(job_dir, "--script", "train.py", "--watch", "--", "--mode", mode, "--bad-rank", "3")
    assert "--gather" not in script.read_text() and "--node-rank" not in script.read_text()
    end, out, _ = submit(slurm, script)
    evidence = job_dir / "logs" / f"ddp-doctor-run-{end.job_id}.0-node0"
    report = json.loads((evidence / "report.json").read_text())
    (gathered,) = [r for r in report["results"] if r["id"] == "run.gather"]
    assert gathered["summary"] == "2 of 2 nodes reported", gathered
    assert {n["host"] for n in report["facts"]["nodes"].values()} == {"node0", "node1"}
    assert (job_dir / "logs" / f"ddp-doctor-run-{end.job_id}.0-node1.txt").exists()
    if mode == "healthy":
        assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), out[-3000:]
        assert report["facts"]["run"]["exit_class"] == "ok"
        return
    # The verdict's exit code: 1, the job's own bug (knowledge/exitcodes.yaml), through srun to the job.
    assert (end.state, end.exit_code) == ("FAILED", "1:0"), out[-3000:]
    first = next(r for r in report["results"] if r["id"] == "run.failure")
    # Rank 3 runs on whichever node the rendezvous made node 1 (join order): the report says which.
    assert first["rank"] == 3 and first["node"] in ("node0", "node1"), first
    assert report["facts"]["run"]["failed_node"] == first["node"]
    assert "ValueError: bad batch at step 2 on rank 3" in flat(out)  # node 0's report is in the job output


FAILS_ONCE_AS_A_BROKEN_NETWORK = """import os, sys
if os.environ.get("SLURM_RESTART_COUNT", "0") == "0":
    print("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
          "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5", file=sys.stderr)
    print("ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
          file=sys.stderr)
    sys.exit(1)
print("trained on", os.uname().nodename)
"""


def test_a_watched_script_requeues_itself_without_the_node_of_an_infrastructure_failure(
    slurm: Slurm, job_dir: Path
) -> None:
    # The first run fails as NCCL does on a broken network (ncclSystemError): verdict 11, the generated script
    # requeues the job with that node excluded; the requeued run passes on the other node.
    (job_dir / "job.py").write_text(FAILS_ONCE_AS_A_BROKEN_NETWORK)
    # One node of the two, so that the other is left to requeue on.
    script = generate(job_dir, "--nodes", "1", "--script", "job.py", "--watch")
    assert "#SBATCH --requeue" in script.read_text()
    job = slurm.sbatch(script)
    first: dict[str, str] = {}
    end_by = time.monotonic() + JOB_S
    while time.monotonic() < end_by:
        first = slurm.job(job)
        if first.get("Restarts") == "1" and first.get("JobState") == "PENDING":
            break
        time.sleep(0.5)
    assert first.get("Restarts") == "1", (first, (job_dir / f"ddp-doctor-{job}.out").read_text()[-3000:])
    bad = first["ExcNodeList"]
    assert bad in ("node0", "node1"), first
    # Slurm holds a requeued batch job for about two minutes (Reason=BeginTime); the test does not wait for it.
    slurm.run(["scontrol", "update", f"JobId={job}", "StartTime=now"])
    end = slurm.wait(job, JOB_S)
    out = (job_dir / f"ddp-doctor-{job}.out").read_text()
    assert (end.state, end.exit_code) == ("COMPLETED", "0:0"), out[-3000:]
    other = "node1" if bad == "node0" else "node0"
    assert f"ddp-doctor: infrastructure failure on {bad}; requeued without it" in out
    assert f"trained on {other}" in out and end.fields["NodeList"] == other
