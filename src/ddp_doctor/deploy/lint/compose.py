"""docker compose files -> one Unit per service."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

from ddp_doctor.checks import table
from ddp_doctor.deploy.lint import dockerfile
from ddp_doctor.deploy.lint.commandline import SHELLS, launches, script_world_size
from ddp_doctor.deploy.lint.idle import command_text, holds_forever
from ddp_doctor.deploy.lint.loader import YList, YMap, read_text, scalar_text
from ddp_doctor.deploy.lint.model import IMAGE_DECIDES, At, Ctx, Structural, Unit, ids_out_of_range
from ddp_doctor.deploy.lint.quantity import docker_bytes
from ddp_doctor.deploy.lint.shellparse import Word, commands
from ddp_doctor.errors import InputError


def _words(svc: YMap, key: str) -> list[Word]:
    value = svc.get(key)
    line = svc.value_line(key)
    if isinstance(value, YList):
        return [Word(str(v), value.line_of(i)) for i, v in enumerate(value)]
    if isinstance(value, str):
        try:
            return [Word(t, line) for t in shlex.split(value)]
        except ValueError:
            return [w for cmd in commands(value, line) for w in cmd.words]
    return []


def _env(svc: YMap) -> dict[str, At[str]]:
    env = svc.get("environment")
    out: dict[str, At[str]] = {}
    if isinstance(env, YMap):
        for k, v in env.items():
            if v is not None:
                out[str(k)] = At(scalar_text(v), env.line_of(k))
    elif isinstance(env, YList):
        for i, item in enumerate(env):
            name, eq, value = str(item).partition("=")
            if eq:
                out[name] = At(value, env.line_of(i))
    return out


def _gpus(svc: YMap) -> At[int | None] | None:
    devices = svc.get("deploy")
    for key in ("resources", "reservations", "devices"):
        devices = devices.get(key) if isinstance(devices, YMap) else None
    if isinstance(devices, YList):
        for i, d in enumerate(devices):
            if not isinstance(d, YMap):
                continue
            caps = d.get("capabilities") or []
            if "gpu" in [str(c) for c in caps] or d.get("driver") == "nvidia":
                if isinstance(d.get("device_ids"), YList):
                    return At(len(d["device_ids"]), d.line_of("device_ids"))
                count = d.get("count")
                if count == "all" or count is None:
                    return At(None, d.line_of("count") if count is not None else devices.line_of(i))
                return At(count if isinstance(count, int) and not isinstance(count, bool) else None, d.line_of("count"))
    if svc.get("gpus") is not None:  # compose spec's short form: gpus: all
        g = svc["gpus"]
        return At(None if g == "all" else (g if isinstance(g, int) else None), svc.line_of("gpus"))
    if svc.get("runtime") == "nvidia":
        visible = _env(svc).get("NVIDIA_VISIBLE_DEVICES")
        count = None
        if visible is not None and visible.value not in ("all", ""):
            count = len(visible.value.split(","))
        return At(count, svc.line_of("runtime"))
    return None


def _every_gpu(svc: YMap, gpus: At[int | None] | None) -> At[str] | None:
    """How the service is handed every GPU of the host: a reservation of count all or with no count or
    device_ids, `gpus: all`, or the NVIDIA runtime with NVIDIA_VISIBLE_DEVICES all or unset."""
    if gpus is None or gpus.value is not None:
        return None
    if svc.get("gpus") == "all":
        return At("gpus: all", svc.line_of("gpus"))
    if svc.get("runtime") == "nvidia" and "deploy" not in svc:
        return At("runtime: nvidia with NVIDIA_VISIBLE_DEVICES all or unset", gpus.line)
    text = str(svc.get("deploy"))
    if "count" in text and "all" not in text:
        return None  # a count written as a variable: not all
    return At("a GPU reservation of count all (or no count)", gpus.line)


def units(doc: YMap, source: str) -> list[Unit]:
    services = doc.get("services")
    if not isinstance(services, YMap):
        return []
    out = []
    words_of: list[list[Word]] = []
    for name, svc in services.items():
        if isinstance(svc, YMap):
            out.append(_service(str(name), svc, services.line_of(name), source))
            words_of.append(_words(svc, "entrypoint") + _words(svc, "command"))
    _shared_gpus(out, words_of)
    return out


_DEVICE_CHOICE = re.compile(r"--(?:gpu|gpus|gpu[-_]id|gpu[-_]ids|device|local[-_]rank|cuda)\b|cuda:\d")
"""Flags a training script takes to choose its GPU (--gpu 1, --device cuda:1, --local_rank 1)."""
DEVICE_VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LOCAL_RANK")


def _shared_gpus(out: list[Unit], words_of: list[list[Word]]) -> None:
    """Services on one host that each run one rank of the same NCCL world (a script given --rank and a
    --world-size over 1, no launcher) with every GPU of the host and nothing choosing a device: each rank
    takes the default CUDA device, GPU 0, unless the script picks one by rank itself."""
    ranked: list[tuple[Unit, At[str], int]] = []
    for u, words in zip(out, words_of, strict=True):
        text = command_text([w.text for w in words])
        rank = _flag_value(words, "--rank")
        world = script_world_size(words)
        if u.gpus_all is None or u.launches or rank is None or world is None or world.value < 2:
            continue
        if _DEVICE_CHOICE.search(text) or any(v in u.env for v in DEVICE_VARIABLES):
            continue
        ranked.append((u, rank, world.value))
    if len(ranked) < 2:
        return
    services = ", ".join(u.name for u, _, _ in ranked)
    for u, rank, size in ranked:
        ctx: Ctx = {"world": size, "services": services, "how": u.gpus_all.value if u.gpus_all else ""}
        u.structural.append(Structural("gpu_shared", rank.line, ctx))


def _flag_value(words: list[Word], flag: str) -> At[str] | None:
    for i, w in enumerate(words):
        if w.text == flag and i + 1 < len(words):
            return At(words[i + 1].text, words[i + 1].line)
        if w.text.startswith(flag + "="):
            return At(w.text.split("=", 1)[1], w.line)
    return None


def _service(name: str, svc: YMap, line: int, source: str) -> Unit:
    u = Unit("compose", source, f"service {name}", line)
    if isinstance(svc.get("image"), str):
        u.image = At(svc["image"], svc.line_of("image"))
    u.env = _env(svc)
    words = _words(svc, "entrypoint") + _words(svc, "command")
    u.launches = launches(words)
    held = holds_forever(command_text([w.text for w in words])) if words else None
    u.idles = At(held, words[-1].line) if held is not None else None
    u.trains = bool(u.launches)
    u.gpus = _gpus(svc)
    u.gpus_all = _every_gpu(svc, u.gpus)
    u.memory_limit = _memory_limit(svc)
    _shm(u, svc, line)
    shell = not words or os.path.basename(words[0].text) in SHELLS
    if shell and (svc.get("tty") is True or svc.get("stdin_open") is True):
        u.interactive = At("tty / stdin_open with a shell", svc.line_of("tty" if "tty" in svc else "stdin_open"))
    persistent, host_shm = _volumes(svc)
    u.mounts = _targets(svc)
    if isinstance(svc.get("working_dir"), str):
        u.workdir = svc["working_dir"]
    if host_shm is not None and u.shm is not None and u.shm.value == "default":
        u.shm = At("host", host_shm)
    u.persistent_volume = persistent
    _privileges(u, svc)
    return u


def _memory_limit(svc: YMap) -> At[int] | None:
    """mem_limit, or deploy.resources.limits.memory in its place when that is set."""
    limit = svc.get("mem_limit")
    lim_line = svc.line_of("mem_limit")
    deploy_limit: Any = svc.get("deploy")
    for key in ("resources", "limits"):
        deploy_limit = deploy_limit.get(key) if isinstance(deploy_limit, YMap) else None
    if isinstance(deploy_limit, YMap) and deploy_limit.get("memory") is not None:
        limit, lim_line = deploy_limit["memory"], deploy_limit.line_of("memory")
    if limit is not None and docker_bytes(limit) is not None:
        return At(docker_bytes(limit) or 0, lim_line)
    return None


def _shm(u: Unit, svc: YMap, line: int) -> None:
    """/dev/shm from `ipc: host` or `shm_size` (a host /dev/shm volume is seen later, in _volumes)."""
    if svc.get("ipc") == "host":
        u.host_ipc = At(True, svc.line_of("ipc"))
        u.shm = At("host", svc.line_of("ipc"))
    elif svc.get("shm_size") is not None:
        size = docker_bytes(svc["shm_size"])
        u.shm_bytes = size
        u.shm = At(
            "tiny" if size is not None and size < table.shm().warn_below_bytes else "memory", svc.line_of("shm_size")
        )
    else:
        u.shm = At("default", line)


def _volumes(svc: YMap) -> tuple[bool, int | None]:
    """(whether a volume that is not tmpfs or /dev/shm is mounted, the line of a volume onto /dev/shm)."""
    volumes = svc.get("volumes")
    persistent, host_shm = False, None
    if not isinstance(volumes, YList):
        return persistent, host_shm
    for i, v in enumerate(volumes):
        target = (
            str(v).split(":")[1]
            if isinstance(v, str) and ":" in v
            else (v.get("target") if isinstance(v, YMap) else None)
        )
        if target == "/dev/shm":
            host_shm = volumes.line_of(i)
            continue
        if isinstance(v, YMap) and v.get("type") == "tmpfs":
            continue
        if (isinstance(v, str) and ":" in v) or isinstance(v, YMap):
            persistent = True
    return persistent, host_shm


def _targets(svc: YMap) -> list[At[str]]:
    """Where the service's volumes (not tmpfs) are mounted."""
    volumes = svc.get("volumes")
    out: list[At[str]] = []
    if not isinstance(volumes, YList):
        return out
    for i, v in enumerate(volumes):
        if isinstance(v, str) and ":" in v:
            out.append(At(v.split(":")[1], volumes.line_of(i)))
        elif isinstance(v, YMap) and v.get("type") != "tmpfs" and isinstance(v.get("target"), str):
            out.append(At(v["target"], volumes.line_of(i)))
    return out


def _privileges(u: Unit, svc: YMap) -> None:
    """privileged, host network, IPC_LOCK, root user."""
    if svc.get("privileged") is True:
        u.privileged = At(True, svc.line_of("privileged"))
    if svc.get("network_mode") == "host":
        u.host_network = At(True, svc.line_of("network_mode"))
    caps = svc.get("cap_add")
    if isinstance(caps, YList):
        for i, cap in enumerate(caps):
            if str(cap).upper() in ("IPC_LOCK", "CAP_IPC_LOCK"):
                u.ipc_lock = At(True, caps.line_of(i))
    user = svc.get("user")
    if user is not None and ids_out_of_range(str(user)):
        u.structural.append(Structural("invalid_id", svc.line_of("user"), {"field": "user", "value": user}))
    elif user is not None and str(user).split(":")[0] in ("0", "root"):
        u.root = At(f"user: {user}", svc.line_of("user"))
    elif user is None and svc.get("build") is not None:
        _built_user(u, svc)
    elif user is None:
        u.root = At(f"no user set; {IMAGE_DECIDES}", u.line)


def _built_user(u: Unit, svc: YMap) -> None:
    """A service built here runs as the last USER of its Dockerfile: read it when it sits where
    `build` says, else say the user is the unread Dockerfile's."""
    build = svc["build"]
    context = build if isinstance(build, str) else (build.get("context") if isinstance(build, YMap) else None)
    name = build.get("dockerfile") if isinstance(build, YMap) else None
    line = svc.line_of("build")
    if not isinstance(context, str) or "$" in context or "://" in context:
        u.unread_user = At("its build context", line)
        return
    path = Path(u.file).resolve().parent / context / (name if isinstance(name, str) else "Dockerfile")
    try:
        stages = dockerfile.units(read_text(path), str(path)) if path.is_file() else []
    except InputError:
        stages = []
    if not stages:
        u.unread_user = At(str(Path(context) / (name if isinstance(name, str) else "Dockerfile")), line)
    elif stages[-1].root is not None:
        u.root = At(f"no user:, and the Dockerfile it builds ({path.name}) has {stages[-1].root.value}", line)
