"""`ddp-doctor check --image`: the whole check inside a real podman container.

The container's rootfs is this machine's root as a throw-away overlay (`--rootfs /:O`), so it
holds this machine's Python and CPU torch; nothing the container writes reaches the host.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_doctor.checks import table
from ddp_doctor.errors import UsageError
from ddp_doctor.image import container
from tests.conftest import run_cli
from tests.image.conftest import Podman

VENV_PATH = f"PATH={Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"

SHM = table.shm().docker_size(None)  # the shared /dev/shm rule, for an unknown GPU count


def args(**kw: object) -> argparse.Namespace:
    base = {
        "image": "example/img:1",
        "engine": "podman",
        "engine_flags": [],
        "static": False,
        "nproc": None,
        "backend": None,
        "timeout": 180.0,
        "master_port": None,
        "dataloader_workers": 2,
        "batch_mb": 32.0,
        "gpu_health": False,
        "nnodes": None,
        "node_rank": None,
        "rdzv_endpoint": None,
        "rdzv_id": None,
        "join_timeout": None,
    }
    return argparse.Namespace(**{**base, **kw})


def test_plan_uses_recommended_flags_unless_given() -> None:
    p = container.plan(args(static=True, nproc=2), "podman", "/stage/lib", "/stage/out", gpu=True)
    assert p.defaults_used and p.flags == [
        "--device",
        "nvidia.com/gpu=all",
        "--shm-size",
        SHM,
        "--ulimit",
        "memlock=-1:-1",
        "--ulimit",
        "stack=67108864:67108864",
    ]
    assert p.argv[:3] == ["podman", "run", "--rm"] and "example/img:1" in p.argv
    assert p.argv[p.argv.index("example/img:1") + 1] == "-c"
    assert (
        p.argv[-7:] == ["--output", "/ddp-doctor/out/report.json", "--static", "--nproc", "2", "--timeout", "180.0"]
        or "--static" in p.argv
        and p.argv[p.argv.index("--nproc") + 1] == "2"
    )
    assert "/stage/lib:/ddp-doctor/lib:ro" in p.argv
    docker = container.plan(args(), "docker", "/l", "/o", gpu=True)
    assert docker.flags[:2] == ["--gpus", "all"]
    assert "--gpus" not in container.plan(args(), "docker", "/l", "/o", gpu=False).flags
    kept, dropped = container.without_ulimits(p.flags)
    assert kept == ["--device", "nvidia.com/gpu=all", "--shm-size", SHM] and dropped[:2] == (
        "--ulimit",
        "memlock=-1:-1",
    )
    mine = container.plan(args(engine_flags=["--shm-size", "64m"]), "podman", "/l", "/o", gpu=False)
    assert mine.flags == ["--shm-size", "64m"] and not mine.defaults_used
    assert "--network" in container.plan(args(nnodes="2"), "docker", "/l", "/o", gpu=False).flags


def test_rootfs_dirs_need_podman(tmp_path: Path) -> None:
    assert container.plan(args(image=f"{tmp_path}:O"), "podman", "/l", "/o", gpu=False).argv.count("--rootfs") == 1
    with pytest.raises(UsageError, match="only podman"):
        container.plan(args(image=str(tmp_path)), "docker", "/l", "/o", gpu=False)
    proc = run_cli("check", "--image", str(tmp_path), "--engine", "docker")
    assert proc.returncode == 2 and "only podman" in proc.stderr


def test_stage_has_the_doctor_and_pure_python_deps(tmp_path: Path) -> None:
    staged = container.stage_lib(tmp_path)
    assert {"ddp_doctor", "rich", "yaml"} <= set(staged)
    assert (tmp_path / "ddp_doctor" / "cli.py").is_file() and not list(tmp_path.rglob("__pycache__"))


def _check(podman: Podman, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    proc = run_cli(
        "check", "--image", "/:O", "--timeout", "150", "--format", "json", *extra, env=podman.env, timeout=300
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.root
@pytest.mark.slow
def test_shm_64m_fails_where_2g_passes(podman: Podman) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:  # two containers at once: each has its own network and /dev/shm
        small_run = pool.submit(_check, podman, "--", "--shm-size", "64m", "-e", VENV_PATH)
        big_run = pool.submit(_check, podman, "--", "--shm-size", "2g", "-e", VENV_PATH)
        (rc, small), (big_rc, big) = small_run.result(), big_run.result()
    by_id = {r["id"]: r for r in small["results"]}
    assert rc == 1 and small["target"] == {"image": "/:O", "engine": "podman"}
    assert by_id["image.container"]["observed"]["flags"] == ["--shm-size", "64m", "-e", VENV_PATH]
    assert "--shm-size 64m" in by_id["image.container"]["summary"]
    assert f"--shm-size {SHM}" in by_id["image.container"]["remedy"]
    assert by_id["env.torch.installed"]["status"] == "pass"  # the container's python is the venv's, with torch
    assert by_id["env.shm"]["status"] == "fail" and "64 MiB" in by_id["env.shm"]["summary"]
    assert [r["status"] for r in small["results"] if r["id"] == "live.dataloader"][:1] == ["fail"]
    assert small["root_cause"] == "live.dataloader"

    by_id = {r["id"]: r for r in big["results"]}
    assert big_rc == 0, [r for r in big["results"] if r["status"] in ("fail", "error")]
    assert "--shm-size 2g" in by_id["image.container"]["summary"]
    assert by_id["env.shm"]["status"] == "pass"
    assert by_id["live.dataloader"]["status"] == "pass" and by_id["live.ddp"]["status"] == "pass"
    _no_containers_left(podman)


@pytest.mark.root
def test_default_flags_are_recorded(podman: Podman) -> None:
    _, report = _check(podman, "--static")
    by_id = {r["id"]: r for r in report["results"]}
    facts = report["facts"]["container"]
    assert facts["defaults_used"] and facts["flags"][facts["flags"].index("--shm-size") + 1] == SHM
    result = by_id["image.container"]
    assert "recommended flags" in result["summary"]
    if facts["dropped_flags"]:  # a host whose engine cannot raise hard limits (this sandbox): said, not hidden
        assert result["status"] == "warn" and "refused --ulimit memlock=-1:-1" in result["cause"]
    else:
        assert result["status"] == "pass"
    assert by_id["env.shm"]["status"] == "pass" and f"{SHM[:-1]}.0 GiB" in by_id["env.shm"]["summary"]
    _no_containers_left(podman)


@pytest.mark.root
def test_deadline_kills_and_removes_the_container(
    podman: Podman, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for key, value in podman.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(container, "STARTUP_S", 0.0)
    monkeypatch.setattr(container.tempfile, "tempdir", str(tmp_path))
    report = container.check_in_image(args(image="/:O", timeout=2.0, engine_flags=["-e", VENV_PATH]))
    result = report.results[0]
    assert result.id == "image.container" and result.status.value == "error"
    assert "did not finish within 2 s" in result.summary
    assert list(tmp_path.iterdir()) == []  # the staging dir is gone
    _no_containers_left(podman)


@pytest.mark.root
def test_missing_image_is_an_error_result(podman: Podman) -> None:
    proc = run_cli("check", "--image", "localhost:1/ddp-doctor/none:1", "--format", "json", env=podman.env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)["results"][0]
    assert result["id"] == "image.container" and result["status"] == "error"
    assert "podman exited" in result["summary"] and "podman run --rm" in result["remedy"]


def _no_containers_left(podman: Podman) -> None:
    out = subprocess.run(
        ["podman", "ps", "-a", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        env=podman.env,
        timeout=60,
        check=True,
    ).stdout
    assert "ddp-doctor-" not in out, out
