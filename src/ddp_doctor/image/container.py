"""`ddp-doctor check --image REF`: the whole check, run inside the image by docker or podman.

The doctor itself (its package and its pure-Python dependencies) is mounted read-only into the
container from where it is installed, so the image needs nothing but a Python and the engine
command still works when typed by hand after the doctor exits. The Report comes back as JSON on
the container's stdout; its facts and results, with a result that records the engine command, are
an ImageCheck, which commands/check.py assembles into the report as it does the host's (one
assembly for every `check`). An image the engine cannot resolve, find or pull is an input error
(exit 2) in the engine's own words.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from ddp_doctor import proc
from ddp_doctor.checkconfig import CheckConfig
from ddp_doctor.checks import table
from ddp_doctor.errors import InputError, UsageError
from ddp_doctor.report import Report, Result, Status, TargetJson

MOUNT = "/ddp-doctor"
STARTUP_S = 90.0
"""Margin on top of --timeout for the engine to create, start and remove the container."""
# Modules mounted next to ddp_doctor; each is pure Python, or falls back to pure Python
# when its C extension does not load (PyYAML). zstandard is left out: only `image` uses it.
VENDORED = ("ddp_doctor", "rich", "markdown_it", "mdurl", "pygments", "yaml", "pynvml", "typing_extensions")
# Every CheckConfig field and how the check inside the container gets it: None = passed through as
# the same flag (--field-name, the field being the flag's argparse dest); else why it stays outside.
# tests/image/test_container.py holds this to every field and every flag of `check`.
INSIDE: dict[str, str | None] = {
    "static": None,
    "expect_gpus": None,
    "nproc": None,
    "oversubscribe": None,
    "backend": None,
    "timeout": None,
    "master_port": None,
    "dataloader_workers": None,
    "batch_mb": None,
    "gpu_health": None,
    "keep_run_dir": "the run directory would be inside the container, removed with it",
    "nnodes": None,
    "node_rank": None,
    "rdzv_endpoint": None,
    "rdzv_id": None,
    "join_timeout": None,
    "image": "the check inside already runs in the image",
    "engine": "the engine runs the container from outside",
    "engine_flags": "flags of the engine's run command, used outside",
}
RLIMIT_REFUSED = "error setting rlimit"
ENTER = f"{MOUNT}/lib/ddp_doctor/image/enter.sh"
"""The entry script (in this package, so mounted with it): runs `python3 -m ddp_doctor` in the image."""
_IMAGE_ERRORS = Path(__file__).with_name("engine_errors.yaml")


@dataclass(frozen=True)
class ContainerPlan:
    engine: str
    argv: list[str]
    flags: list[str]
    recommended: list[str]
    defaults_used: bool
    name: str
    dropped: tuple[str, ...] = ()
    """Recommended flags the engine refused on this host and the run went without (e.g. --ulimit)."""


def has_gpu() -> bool:
    return Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi") is not None


def recommended_flags(engine: str, gpu: bool, multinode: bool = False) -> list[str]:
    """What a DDP job needs from the engine: GPUs, a large /dev/shm, unlimited locked memory."""
    flags = (["--gpus", "all"] if engine == "docker" else ["--device", "nvidia.com/gpu=all"]) if gpu else []
    # /dev/shm sized by the shared rule (checks/knowledge.yaml): "all" GPUs is a count we do not know
    flags += [
        "--shm-size",
        table.shm().docker_size(None),
        "--ulimit",
        "memlock=-1:-1",
        "--ulimit",
        "stack=67108864:67108864",
    ]
    if multinode:
        flags += ["--network", "host"]
    return flags


def pick_engine(choice: str | None) -> str:
    for name in [choice] if choice else ["podman", "docker"]:
        if name and shutil.which(name):
            return name
    wanted = choice or "podman or docker"
    raise UsageError(f"no container engine: {wanted} is not on PATH; install one or pass --engine")


def inner_args(config: CheckConfig) -> list[str]:
    """The `check` argv inside the container, rebuilt from the config by the INSIDE table."""
    out = ["check", "--format", "json"]  # the report comes back on the container's stdout
    for f in fields(config):
        value = getattr(config, f.name)
        if INSIDE[f.name] is not None or value is None or value is False:
            continue
        flag = "--" + f.name.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


def _rootfs(ref: str) -> str | None:
    """A directory REF (optionally DIR:O for a throw-away overlay) runs with podman --rootfs."""
    path = ref.removesuffix(":O")
    return ref if os.path.isdir(path) else None


def without_ulimits(flags: list[str]) -> tuple[list[str], tuple[str, ...]]:
    kept: list[str] = []
    dropped: list[str] = []
    it = iter(flags)
    for flag in it:
        if flag == "--ulimit":
            dropped += [flag, next(it, "")]
        else:
            kept.append(flag)
    return kept, tuple(dropped)


def plan(
    config: CheckConfig, engine: str, mounts: list[str], gpu: bool | None = None, drop_ulimits: bool = False
) -> ContainerPlan:
    name = f"ddp-doctor-{uuid.uuid4().hex[:12]}"
    recommended = recommended_flags(engine, has_gpu() if gpu is None else gpu, bool(config.nnodes))
    flags = list(config.engine_flags) or recommended
    dropped: tuple[str, ...] = ()
    if drop_ulimits:
        flags, dropped = without_ulimits(flags)
    image = config.image or ""  # commands/check.py sends only a config with --image here
    rootfs = _rootfs(image)
    if rootfs and engine != "podman":
        raise UsageError(f"--image {image} is a directory: only podman runs a rootfs directory (--engine podman)")
    target = ["--rootfs", rootfs] if rootfs else [image]
    argv = [
        engine,
        "run",
        "--rm",
        "--name",
        name,
        "--entrypoint",
        "sh",
        *mounts,
        "-e",
        "PYTHONDONTWRITEBYTECODE=1",
        "-e",
        "NO_COLOR=1",
        *flags,
        *target,
        ENTER,
        *inner_args(config),
    ]
    return ContainerPlan(engine, argv, flags, recommended, not config.engine_flags, name, dropped)


def by_hand(p: ContainerPlan) -> str:
    """The engine command a person can run after the doctor exits: the same run, its report as text."""
    argv = list(p.argv)
    i = argv.index("--name")
    del argv[i : i + 2]  # the name is only there so the doctor can remove a container it had to kill
    i = argv.index(ENTER)
    inner = argv[i + 1 :]
    j = inner.index("--format")
    del inner[j : j + 2]
    return shlex.join(argv[: i + 1] + inner)


def lib_mounts() -> tuple[list[str], list[str]]:
    """`-v SRC:/ddp-doctor/lib/NAME:ro` for ddp_doctor and each pure-Python dependency, from where it is
    installed (it stays there after the run); returns the flags and the modules mounted."""
    flags: list[str] = []
    mounted: list[str] = []
    for module in VENDORED:
        spec = importlib.util.find_spec(module)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin).resolve()
        if origin.name == "__init__.py":
            source, name = origin.parent, module
        elif origin.suffix == ".py":
            source, name = origin, origin.name
        else:
            continue
        flags += ["-v", f"{source}:{MOUNT}/lib/{name}:ro"]
        mounted.append(module)
    return flags, mounted


def image_error(engine: str, image: str, stderr: str) -> str | None:
    """The engine's own line when it could not use the image itself (not found, not pullable, bad name)."""
    import yaml

    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for entry in yaml.safe_load(_IMAGE_ERRORS.read_text(encoding="utf-8")):
        pattern = re.compile(entry["pattern"])
        hit = next((ln for ln in reversed(lines) if pattern.search(ln)), None)
        if hit is not None:
            return f"{engine} cannot run image {image}: {hit[:600]}"
    return None


def _remove(engine: str, name: str) -> None:
    argv = [engine, "rm", "-f", "-t", "0", name] if engine == "podman" else [engine, "rm", "-f", name]
    proc.run(argv, timeout_s=60)


@dataclass(frozen=True)
class ImageCheck:
    """What `check --image` found, for the report assembly every `check` goes through."""

    target: TargetJson
    facts: Mapping[str, object]
    """The inner check's facts, and facts["container"]: how the container ran (ContainerRun)."""
    results: tuple[Result, ...]
    """image.container first, then the inner check's results."""
    root_cause: str | None


def check_in_image(config: CheckConfig) -> ImageCheck:
    engine = pick_engine(config.engine)
    mounts, mounted = lib_mounts()
    finished = False
    p: ContainerPlan | None = None
    try:
        p = plan(config, engine, mounts)
        deadline = config.timeout + STARTUP_S  # CheckConfig's default when not given
        done = proc.run(p.argv, timeout_s=deadline)
        finished = not done.timed_out
        if p.defaults_used and finished and not _printed_a_report(done) and RLIMIT_REFUSED in done.stderr:
            # Rootless or sandboxed engines cannot raise hard limits; rather than no answer, run without them.
            p = plan(config, engine, mounts, drop_ulimits=True)
            done = proc.run(p.argv, timeout_s=deadline)
            finished = not done.timed_out
        if finished and not _printed_a_report(done):
            problem = image_error(engine, config.image or "", done.stderr)
            if problem:
                raise InputError(problem)
        return _merge(config, p, done, mounted, deadline)
    finally:
        if p is not None and not finished:
            _remove(engine, p.name)  # a killed client leaves its container running


def _printed_a_report(done: proc.Completed) -> bool:
    """The container's stdout is a report's JSON (an object with results); _inner_report reads it."""
    try:
        value = json.loads(done.stdout)
    except ValueError:
        return False
    return isinstance(value, dict) and "results" in value


@dataclass(frozen=True)
class ContainerRun:
    """How the container ran: facts["container"] of the report."""

    engine: str
    argv: list[str]
    flags: list[str]
    defaults_used: bool
    recommended_flags: list[str]
    dropped_flags: list[str]
    returncode: int | None
    duration_s: float
    vendored: list[str]
    command: str
    stderr_tail: str


def _merge(
    config: CheckConfig, p: ContainerPlan, done: proc.Completed, mounted: list[str], deadline: float
) -> ImageCheck:
    command = by_hand(p)
    run = ContainerRun(
        engine=p.engine,
        argv=p.argv,
        flags=p.flags,
        defaults_used=p.defaults_used,
        recommended_flags=p.recommended,
        dropped_flags=list(p.dropped),
        returncode=done.returncode,
        duration_s=round(done.duration_s, 3),
        vendored=mounted,
        command=command,
        stderr_tail=done.stderr[-4000:],
    )
    inner, problem = _inner_report(p, done, deadline)
    target = TargetJson(image=config.image or "", engine=p.engine)
    if inner is None:
        failed = Result(
            "image.container",
            "Check inside the image",
            Status.ERROR,
            problem or "no report",
            cause="the container could not start or run ddp-doctor (image not found, no sh or python in it, "
            "or the engine refused a flag)",
            remedy=f"try it by hand: {command}",
            observed={"flags": p.flags, "engine": p.engine},
        )
        return ImageCheck(target, {"container": asdict(run)}, (failed,), None)
    ran = _ran_inside(config, p, done, inner)
    return ImageCheck(target, {**inner.facts, "container": asdict(run)}, (ran, *inner.results), inner.root_cause)


def _inner_report(p: ContainerPlan, done: proc.Completed, deadline: float) -> tuple[Report | None, str | None]:
    """The report the check printed inside the container, or why there is none."""
    if done.timed_out:
        return None, f"the container did not finish within {deadline:.0f} s; it was killed and removed"
    if not _printed_a_report(done):
        tail = done.stderr.strip().splitlines()[-3:] or done.stdout.strip().splitlines()[-3:]
        return None, f"{p.engine} exited {done.returncode} without a report: {' | '.join(tail)[:600] or 'no output'}"
    try:
        return Report.from_dict(json.loads(done.stdout)), None
    except (ValueError, KeyError, TypeError) as exc:
        return None, f"the report printed inside the container is unreadable: {exc}"


def _ran_inside(config: CheckConfig, p: ContainerPlan, done: proc.Completed, inner: Report) -> Result:
    """image.container: how the check ran in the image, and whether the engine dropped a flag."""
    which = "the recommended flags" if p.defaults_used else "your flags"
    failed = inner.failures()
    remedy = None
    if failed and not p.defaults_used and p.flags != p.recommended:
        remedy = f"compare with the recommended flags: ddp-doctor check --image {config.image} -- {shlex.join(p.recommended)}"
    status, cause = Status.PASS, None
    if p.dropped:
        status = Status.WARN
        cause = (
            f"{p.engine} refused {shlex.join(p.dropped)} on this host (its hard limits are lower and it cannot "
            "raise them: rootless or sandboxed), so the check ran without them; NCCL over InfiniBand needs "
            "unlimited locked memory"
        )
        remedy = f"run the engine as root (rootful docker/podman) or raise the hard limits: {shlex.join(p.dropped)}"
    return Result(
        "image.container",
        "Check inside the image",
        status,
        f"ran `ddp-doctor check` in {config.image} with {which}: {p.engine} run {shlex.join(p.flags)}; "
        f"inside: {inner.verdict().value} ({len(failed)} failing)",
        cause=cause,
        remedy=remedy,
        observed={"flags": p.flags, "engine": p.engine, "defaults_used": p.defaults_used},
        expected={"recommended_flags": p.recommended},
        duration_s=round(done.duration_s, 3),
    )
