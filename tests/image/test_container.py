"""`ddp-doctor check --image`: the whole check inside a real podman container.

The container's rootfs is this machine's root as a throw-away overlay (`--rootfs /:O`), so it
holds this machine's Python and CPU torch; nothing the container writes reaches the host.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.checkconfig import CheckConfig
from ddp_doctor.checks import table
from ddp_doctor.commands.check import config_from_args
from ddp_doctor.errors import UsageError
from ddp_doctor.image import container
from tests.conftest import run_cli
from tests.image.conftest import Podman
from tests.test_checkconfig import check_parser

VENV_PATH = f"PATH={Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"

SHM = table.shm().docker_size(None)  # the shared /dev/shm rule, for an unknown GPU count


def args(**kw: Any) -> CheckConfig:
    return CheckConfig(**{"image": "example/img:1", "engine": "podman", **kw})


def test_plan_uses_recommended_flags_unless_given() -> None:
    mounts = ["-v", "/site/ddp_doctor:/ddp-doctor/lib/ddp_doctor:ro"]
    p = container.plan(args(static=True, nproc=2), "podman", mounts, gpu=True)
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
    assert p.argv[p.argv.index("example/img:1") + 1] == "/ddp-doctor/lib/ddp_doctor/image/enter.sh"
    inner = p.argv[p.argv.index("/ddp-doctor/lib/ddp_doctor/image/enter.sh") + 1 :]
    assert inner[:6] == ["check", "--format", "json", "--static", "--nproc", "2"]
    assert "/site/ddp_doctor:/ddp-doctor/lib/ddp_doctor:ro" in p.argv and "-c" not in p.argv
    hand = container.by_hand(p)
    assert "--name" not in hand and "--format" not in hand and "…" not in hand
    assert " example/img:1 /ddp-doctor/lib/ddp_doctor/image/enter.sh check --static --nproc 2 " in hand
    docker = container.plan(args(), "docker", [], gpu=True)
    assert docker.flags[:2] == ["--gpus", "all"]
    assert "--gpus" not in container.plan(args(), "docker", [], gpu=False).flags
    kept, dropped = container.without_ulimits(p.flags)
    assert kept == ["--device", "nvidia.com/gpu=all", "--shm-size", SHM] and dropped[:2] == (
        "--ulimit",
        "memlock=-1:-1",
    )
    mine = container.plan(args(engine_flags=("--shm-size", "64m")), "podman", [], gpu=False)
    assert mine.flags == ["--shm-size", "64m"] and not mine.defaults_used
    assert "--network" in container.plan(args(nnodes="2"), "docker", [], gpu=False).flags


def test_rootfs_dirs_need_podman(tmp_path: Path) -> None:
    assert container.plan(args(image=f"{tmp_path}:O"), "podman", [], gpu=False).argv.count("--rootfs") == 1
    with pytest.raises(UsageError, match="only podman"):
        container.plan(args(image=str(tmp_path)), "docker", [], gpu=False)
    proc = run_cli("check", "--image", str(tmp_path), "--engine", "docker")
    assert proc.returncode == 2 and "only podman" in proc.stderr


def test_the_doctor_is_mounted_from_where_it_is_installed() -> None:
    flags, mounted = container.lib_mounts()
    assert {"ddp_doctor", "rich", "yaml"} <= set(mounted)
    sources = [f.split(":")[0] for f in flags[1::2]]
    import ddp_doctor

    assert str(Path(ddp_doctor.__file__).resolve().parent) in sources  # not a temp copy that goes away
    assert Path(ddp_doctor.__file__).with_name("image").joinpath("enter.sh").is_file()


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
    found = container.check_in_image(args(image="/:O", timeout=2.0, engine_flags=("-e", VENV_PATH)))
    result = found.results[0]
    assert result.id == "image.container" and result.status.value == "error"
    assert "did not finish within 2 s" in result.summary
    _no_containers_left(podman)


@pytest.mark.root
def test_an_image_the_engine_cannot_get_is_an_input_error_in_its_words(podman: Podman, tmp_path: Path) -> None:
    proc = run_cli("check", "--image", "localhost:1/ddp-doctor/none:1", "--format", "json", env=podman.env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("ddp-doctor: error: podman cannot run image localhost:1/ddp-doctor/none:1: Error: ")
    assert "connection refused" in line  # the engine's words, not ours
    # a short name with no search registries (the case): exit 2, podman's sentence
    registries = tmp_path / "registries.conf"
    registries.write_text("unqualified-search-registries = []\n")
    env = {**podman.env, "CONTAINERS_REGISTRIES_CONF": str(registries)}
    proc = run_cli("check", "--image", "nosuch/thing:1", env=env, timeout=120)
    assert proc.returncode == 2 and "verdict" not in proc.stdout, proc.stdout
    assert 'short-name "nosuch/thing:1" did not resolve to an alias' in proc.stderr
    _no_containers_left(podman)


@pytest.mark.root
def test_the_printed_command_runs_as_printed_after_the_doctor_exits(podman: Podman) -> None:
    _, report = _check(podman, "--static")
    command = report["facts"]["container"]["command"]
    assert "…" not in command and " -c " not in command
    proc = subprocess.run(
        shlex.split(command), check=False, capture_output=True, text=True, env=podman.env, timeout=300
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert proc.stdout.startswith("Static checks only"), proc.stdout[:500]
    _no_containers_left(podman)


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


def test_engine_error_table_has_a_source_per_entry_and_matches_real_wordings() -> None:
    import re

    import yaml

    entries = yaml.safe_load(container._IMAGE_ERRORS.read_text())
    assert all(e["source"] and e["meaning"] and re.compile(e["pattern"]) for e in entries)
    seen = {  # stderr lines as podman 4.3.1 and docker print them (engine_errors.yaml names where from)
        'Error: short-name "nosuch/thing:1" did not resolve to an alias and no unqualified-search registries '
        'are defined in "/etc/containers/registries.conf"': "short-name",
        "Error: localhost/nosuch:1: image not known": "image not known",
        "docker: Error response from daemon: pull access denied for ndtar, repository does not exist or may "
        "require 'docker login'.": "pull access denied",
        "Error: repository name must be lowercase": "lowercase",
    }
    for line, words in seen.items():
        found = container.image_error("podman", "x", "Trying to pull ...\n" + line + "\n")
        assert found is not None and words in found and found.startswith("podman cannot run image x: ")
    assert container.image_error("podman", "x", "Error: OCI runtime error: crun: unknown option --foo") is None


def test_every_config_field_is_passed_inside_or_kept_outside_on_purpose() -> None:
    assert list(container.INSIDE) == [f.name for f in dataclasses.fields(CheckConfig)]
    assert all(why is None or why.strip() for why in container.INSIDE.values())


def test_the_inner_argv_parses_back_to_the_same_config() -> None:
    """Each passed field set to a value unlike its default: the check inside must read the same values
    (a renamed flag or a field the table forgets fails here)."""
    given = CheckConfig(
        static=True,
        expect_gpus=4,
        nproc=3,
        oversubscribe=True,
        backend="gloo",
        timeout=77.5,
        master_port=29123,
        dataloader_workers=0,
        batch_mb=8.0,
        gpu_health=True,
        keep_run_dir=True,
        nnodes="1:2",
        node_rank=1,
        rdzv_endpoint="node0:29500",
        rdzv_id="job-7",
        join_timeout=20.0,
        image="example/img:1",
        engine="podman",
        engine_flags=("--shm-size", "1g"),
    )
    inner = container.inner_args(given)
    assert inner[:3] == ["check", "--format", "json"]
    back = config_from_args(check_parser().parse_args(inner[1:]))
    for name, why in container.INSIDE.items():
        if why is None:
            assert getattr(back, name) == getattr(given, name), name
            assert getattr(given, name) != getattr(CheckConfig(), name), f"{name}: give it a non-default value"
        else:
            assert getattr(back, name) == getattr(CheckConfig(), name), name
