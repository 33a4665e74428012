"""The generated docker and Slurm scripts run as real shell scripts (with recording stand-ins for
docker, srun, scontrol and the launched command), so their quoting is proven, not eyeballed."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ddp_doctor.cli import main
from tests.deploy.specs import golden_path

RECORD = '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > "$RECORD_DIR/$(basename "$0").argv"\n'
# docker: `run` records its argv (the last run's in docker.argv, each run's --name in docker.runs), writes a
# container id to its --cidfile (unless FAKE_NO_CONTAINER) and exits FAKE_RUN_RC; with FAKE_RUN_SLEEP it waits,
# recording a TERM or HUP it gets. `inspect` answers the next of FAKE_STATES (comma-separated, the last one
# repeats), as `docker inspect --format '{{.State.Status}} {{.State.ExitCode}}'` does; `rm` is recorded.
DOCKER = r"""#!/bin/sh
case $1 in
run)
    for a in "$@"; do printf '%s\n' "$a"; done > "$RECORD_DIR/docker.argv"
    prev=
    for a in "$@"; do
        if [ "$prev" = --cidfile ] && [ -z "${FAKE_NO_CONTAINER:-}" ]; then echo "cid$$" > "$a"; fi
        if [ "$prev" = --name ]; then echo "$a" >> "$RECORD_DIR/docker.runs"; fi
        prev=$a
    done
    if [ -n "${FAKE_RUN_SLEEP:-}" ]; then
        sleep "$FAKE_RUN_SLEEP" &
        sp=$!
        trap 'kill $sp; echo TERM >> "$RECORD_DIR/docker.signals"; exit 143' TERM
        trap 'kill $sp; echo HUP >> "$RECORD_DIR/docker.signals"; exit 129' HUP
        : > "$RECORD_DIR/docker.running"
        wait $sp
    fi
    exit "${FAKE_RUN_RC:-0}" ;;
inspect)
    n=$(cat "$RECORD_DIR/docker.inspected" 2>/dev/null || echo 0)
    echo $((n + 1)) > "$RECORD_DIR/docker.inspected"
    i=0
    IFS=,
    for state in ${FAKE_STATES-exited 0}; do
        [ "$i" -ge "$n" ] && break
        i=$((i + 1))
    done
    printf '%s\n' "$state" ;;
rm)
    shift
    echo "$*" >> "$RECORD_DIR/docker.removed" ;;
esac
"""
# srun: drop its own options, run the command as a task of node SLURM_NODEID
SRUN = '#!/bin/sh\nwhile [ "${1#-}" != "$1" ]; do shift; done\nexec "$@"\n'
SCONTROL = '#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "gpu-node-07\\ngpu-node-08\\n"\n'


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (
        ("docker", DOCKER),
        ("ddp-doctor", RECORD),
        ("torchrun", RECORD),
        ("srun", SRUN),
        ("scontrol", SCONTROL),
    ):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_script(
    script: Path, fake_bin: Path, cwd: Path, env: dict[str, str], shell: str = "sh"
) -> subprocess.CompletedProcess[str]:
    full = {"PATH": f"{fake_bin}:{os.environ['PATH']}", "RECORD_DIR": str(cwd), "HOME": str(cwd), **env}
    return subprocess.run(
        [shell, str(script)], check=False, cwd=cwd, env=full, capture_output=True, text=True, timeout=30
    )


def argv(cwd: Path, name: str) -> list[str]:
    return (cwd / f"{name}.argv").read_text().splitlines()


def test_docker_single_node(fake_bin: Path, tmp_path: Path) -> None:
    proc = run_script(golden_path("1x8", "docker"), fake_bin, tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    got = argv(tmp_path, "docker")
    assert got[:2] == ["run", "--cidfile"] and "--rm" not in got  # removed by the script once its status is read
    assert got[got.index("--volume") + 1] == "/datasets/imagenet:/data:ro"
    assert f"{tmp_path}/logs:/logs" in got and (tmp_path / "logs").is_dir()
    assert got[-5:] == ["nvcr.io/nvidia/pytorch:24.05-py3", "ddp-doctor", "check", "--nproc", "8"]


def test_docker_multi_node_needs_its_variables(fake_bin: Path, tmp_path: Path) -> None:
    script = golden_path("4x8", "docker")
    proc = run_script(script, fake_bin, tmp_path, {})
    assert proc.returncode != 0 and "NODE_RANK" in proc.stderr and not (tmp_path / "docker.argv").exists()
    proc = run_script(script, fake_bin, tmp_path, {"NODE_RANK": "3", "MASTER_ADDR": "10.0.0.1", "RUN_ID": "r42"})
    assert proc.returncode == 0, proc.stderr
    got = argv(tmp_path, "docker")
    tail = got[got.index("nvcr.io/nvidia/pytorch:24.05-py3") + 1 :]
    assert tail == [
        "ddp-doctor",
        "check",
        "--nproc",
        "8",
        "--nnodes",
        "4",
        "--node-rank",
        "3",
        "--rdzv-endpoint",
        "10.0.0.1:29500",
        "--rdzv-id",
        "doctor-4x8-r42",
    ]
    assert got[got.index("--name") + 1] == "doctor-4x8-node-3" and "host" == got[got.index("--network") + 1]
    assert "NCCL_SOCKET_IFNAME=eth0" in got


def test_docker_device_list_and_user_args_arrive_literally(fake_bin: Path, tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    assert (
        main(
            [
                "launch",
                "--target",
                "docker",
                "--image",
                "img:1",
                "--devices",
                "0,3",
                "-o",
                str(script),
                "--script",
                "my train.py",
                "--",
                "--note",
                "it's $HOME `id`",
            ]
        )
        == 0
    )
    proc = run_script(script, fake_bin, tmp_path, {})
    assert proc.returncode == 0, proc.stderr
    got = argv(tmp_path, "docker")
    assert got[got.index("--gpus") + 1] == '"device=0,3"'
    assert got[-3:] == ["my train.py", "--note", "it's $HOME `id`"]  # the user's words arrive literally
    assert got[got.index("img:1") + 1 :][:6] == ["torchrun", "--standalone", "--nnodes", "1", "--nproc-per-node", "2"]


def test_slurm_each_task_meets_at_the_first_node(fake_bin: Path, tmp_path: Path) -> None:
    env = {"SLURM_JOB_NODELIST": "gpu-node-[07-08]", "SLURM_NODEID": "1", "SLURM_JOB_ID": "4242", "SLURM_NNODES": "4"}
    proc = run_script(golden_path("4x8", "slurm"), fake_bin, tmp_path, env, shell="bash")
    assert proc.returncode == 0, proc.stderr
    assert argv(tmp_path, "ddp-doctor") == [
        "check",
        "--nproc",
        "8",
        "--nnodes",
        "4",
        "--node-rank",
        "1",
        "--rdzv-endpoint",
        "gpu-node-07:29500",
        "--rdzv-id",
        "4242",
        "--output",  # node 1's own report goes beside the job output; node 0's cluster report is the output
        "/logs/ddp-doctor-check-4242-node1.txt",  # the logs mount inside the pyxis container
    ]
    proc = run_script(golden_path("4x8-elastic-script", "slurm"), fake_bin, tmp_path, env, shell="bash")
    assert proc.returncode == 0, proc.stderr
    assert argv(tmp_path, "torchrun") == [
        "--nnodes",
        "2:4",
        "--nproc-per-node",
        "8",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        "gpu-node-07:29500",
        "--rdzv-id",
        "4242",
        "train.py",
        "--epochs",
        "3",
    ]


def _lines(cwd: Path, name: str) -> list[str]:
    path = cwd / name
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize(
    ("run_rc", "states", "expected"),
    [
        pytest.param(0, "exited 3", 3, id="docker's CLI on podman's API says 0 for a failed container"),
        pytest.param(127, "exited 3", 3, id="podman under load says 127 for a failed container"),
        pytest.param(127, "exited 0", 0, id="podman under load says 127 for a container that exited 0"),
        pytest.param(
            0, "stopped 0,exited 3", 3, id="podman still storing the status: asked again", marks=pytest.mark.slow
        ),
        pytest.param(127, "created 0", 127, id="a container that never started: run's own status"),
        pytest.param(0, "exited 0", 0, id="both agree"),
    ],
)
def test_docker_script_exits_with_the_containers_own_status(
    fake_bin: Path, tmp_path: Path, run_rc: int, states: str, expected: int
) -> None:
    env = {"FAKE_RUN_RC": str(run_rc), "FAKE_STATES": states, "TMPDIR": str(tmp_path)}
    proc = run_script(golden_path("1x8", "docker"), fake_bin, tmp_path, env)
    assert proc.returncode == expected, proc.stderr
    assert len(_lines(tmp_path, "docker.removed")) == 1, "the container is removed once its status is read"
    assert _lines(tmp_path, "docker.removed")[0].startswith("-f cid")
    assert not list(tmp_path.glob("ddp-doctor-cid.*")), "the cid file outlived the script"


def test_docker_script_without_a_container_keeps_runs_own_status(fake_bin: Path, tmp_path: Path) -> None:
    env = {"FAKE_RUN_RC": "125", "FAKE_NO_CONTAINER": "1", "TMPDIR": str(tmp_path)}  # a bad flag, a name in use
    proc = run_script(golden_path("1x8", "docker"), fake_bin, tmp_path, env)
    assert proc.returncode == 125
    assert _lines(tmp_path, "docker.inspected") == [] and _lines(tmp_path, "docker.removed") == []


def test_a_failed_preflight_container_stops_the_script_before_the_job(fake_bin: Path, tmp_path: Path) -> None:
    env = {"NODE_RANK": "0", "MASTER_ADDR": "10.0.0.1", "RUN_ID": "r1", "FAKE_STATES": "exited 1"}
    proc = run_script(golden_path("2x8-watch-preflight", "docker"), fake_bin, tmp_path, env)  # run says 0
    assert proc.returncode == 1
    assert "ddp-doctor preflight failed (exit 1): the job did not start" in proc.stderr
    assert _lines(tmp_path, "docker.runs") == ["train-2x8-preflight-node-0"]


@pytest.mark.parametrize(
    ("sig", "code"), [pytest.param(signal.SIGTERM, 143, id="TERM"), pytest.param(signal.SIGHUP, 129, id="HUP")]
)
def test_a_signal_to_the_docker_script_reaches_the_run_and_the_status_is_the_containers(
    fake_bin: Path, tmp_path: Path, sig: signal.Signals, code: int
) -> None:
    env = {
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "RECORD_DIR": str(tmp_path),
        "FAKE_RUN_SLEEP": "120",
        "FAKE_STATES": f"exited {code}",
        "TMPDIR": str(tmp_path),
    }
    script = subprocess.Popen(["sh", str(golden_path("1x8", "docker"))], cwd=tmp_path, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "docker.running").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "docker.running").exists(), "the container never started"
        script.send_signal(sig)  # to the script alone, as `kill PID` or systemd's main-process stop does
        assert script.wait(timeout=30) == code
        assert _lines(tmp_path, "docker.signals") == [sig.name.removeprefix("SIG")]
        assert len(_lines(tmp_path, "docker.removed")) == 1
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
            script.wait(timeout=30)
