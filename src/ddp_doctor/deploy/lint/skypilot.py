"""SkyPilot task YAML -> a Unit for the task: its GPUs (resources.accelerators) and nodes
(num_nodes), what `setup` and `run` start (read by the shell reader, with the task's envs and the
variables SkyPilot sets on every node), its image, and which mounts outlive the cluster.

`run` runs on every node of the cluster at once, as `srun` runs a step on every node of a Slurm
allocation, so the same rules judge the launcher in it (https://docs.skypilot.co/en/latest/
running-jobs/distributed-jobs.html).
"""

from __future__ import annotations

from typing import Any

from ddp_doctor.deploy.lint import scripts
from ddp_doctor.deploy.lint.idle import holds_forever
from ddp_doctor.deploy.lint.loader import YList, YMap
from ddp_doctor.deploy.lint.model import At, Unit
from ddp_doctor.deploy.lint.workloads import as_int, ymap

TASK_KEYS = {
    "name",
    "workdir",
    "num_nodes",
    "resources",
    "envs",
    "secrets",
    "file_mounts",
    "volumes",
    "setup",
    "run",
    "service",
    "config",
    "event_callback",
    "inputs",
    "outputs",
    "pool",
}
"""Top-level fields of a task (docs/source/reference/yaml-spec.rst of skypilot-org/skypilot)."""
MARKS = {"run", "setup", "resources", "num_nodes", "file_mounts"}
WORKDIR = "~/sky_workdir"
"""Where SkyPilot syncs `workdir` and runs setup and run: the node's own disk."""
KEPT_MODES = ("MOUNT", "MOUNT_CACHED")
"""file_mounts modes whose writes reach the bucket; COPY (and `path: s3://...`) copies in once."""


def is_task(doc: Any) -> bool:
    """A mapping whose fields are all a SkyPilot task's, with something to run or provision."""
    return isinstance(doc, YMap) and bool(doc) and set(map(str, doc)) <= TASK_KEYS and bool(MARKS & set(doc))


def _count(spec: Any) -> int | None:
    """'A100:8' -> 8, 'A100' -> 1, {A100: 8} -> 8; None when unreadable."""
    if isinstance(spec, YMap) and len(spec) == 1:
        value = next(iter(spec.values()))
        return 1 if value is None else as_int(value)
    if isinstance(spec, str):
        name, _, n = spec.partition(":")
        return (as_int(n) if n else 1) if name else None
    return None


def accelerators(resources: YMap) -> At[int | None] | None:
    """GPUs per node: one accelerator, or a list / set of alternatives (their count when all agree),
    also under any_of / ordered. None when no accelerator is asked for."""
    choices: list[tuple[Any, int]] = []
    for r in [resources, *[x for k in ("any_of", "ordered") for x in resources.get(k) or [] if isinstance(x, YMap)]]:
        value = r.get("accelerators")
        if value is None:
            continue
        line = r.line_of("accelerators")
        if isinstance(value, YList):
            choices += [(v, line) for v in value]
        elif isinstance(value, YMap) and len(value) > 1:  # a set of alternatives {A100:1, V100:1}
            choices += [(f"{k}:{v}" if v is not None else str(k), line) for k, v in value.items()]
        else:
            choices.append((value, line))
    if not choices:
        return None
    counts = {_count(v) for v, _ in choices}
    return At(counts.pop() if len(counts) == 1 else None, choices[0][1])


def _mounts(doc: YMap) -> tuple[list[At[str]], bool]:
    """(mount points whose contents outlive the cluster, whether any file_mount or volume is declared)."""
    kept: list[At[str]] = []
    mounts = ymap(doc, "file_mounts")
    for path, spec in mounts.items():
        line = mounts.line_of(path)
        if isinstance(spec, YMap):
            store = str(spec.get("store") or "")
            if store == "volume":
                if spec.get("persistent") is True or ("name" in spec and "config" not in spec):
                    kept.append(At(str(path), line))
            elif str(spec.get("mode") or "MOUNT").upper() in KEPT_MODES:
                kept.append(At(str(path), line))
    volumes = doc.get("volumes")
    if isinstance(volumes, YMap):  # volumes: {/mnt/data: my-volume}
        kept += [At(str(p), volumes.line_of(p)) for p in volumes]
    return kept, bool(mounts) or bool(volumes)


def units(doc: YMap, source: str, notes: list[str]) -> list[Unit]:
    name = doc.get("name") or "(unnamed)"
    u = Unit("skypilot", source, f"SkyPilot task {name}", doc.line_of("run") if "run" in doc else doc.line)
    resources = ymap(doc, "resources")
    u.gpus = accelerators(resources)
    nodes = as_int(doc.get("num_nodes", 1))
    u.nodes, u.nodes_what = (At(nodes, doc.line_of("num_nodes")), "num_nodes") if nodes is not None else (None, "")
    image = resources.get("image_id")
    if isinstance(image, str) and image.startswith("docker:"):
        u.image = At(image[len("docker:") :], resources.line_of("image_id"))
    envs = ymap(doc, "envs")
    u.env = {str(k): At(str(v), envs.line_of(k)) for k, v in envs.items() if v is not None}
    # What SkyPilot sets on every node (docs: running-jobs/environment-variables); the rank and IPs
    # differ per node and stay unexpanded.
    env = scripts.Env()
    env.scalars.update(u.env)
    if u.nodes is not None:
        env.scalars["SKYPILOT_NUM_NODES"] = At(str(u.nodes.value), u.nodes.line)
    if u.gpus is not None and u.gpus.value is not None:
        env.scalars["SKYPILOT_NUM_GPUS_PER_NODE"] = At(str(u.gpus.value), u.gpus.line)
    found: list[Unit] = []
    for section in ("setup", "run"):
        text = doc.get(section)
        if not isinstance(text, str):
            continue
        scan, env = scripts.read(text, source, notes, doc.value_line(section), env)
        u.launches += [launch for launch, _ in scan.bare]
        found += scan.docker
        if scripts.RAY_NODE.search(text):  # the task's own Ray cluster runs them
            if scan.ray_workers:
                u.ray_workers = scan.ray_workers[0]
            elif scan.ray_workers_told and u.gpus is not None and u.gpus.value:
                # Nothing said of GPUs, on a Ray cluster of GPU nodes the task asked for: read as trained there.
                u.ray_workers = scan.ray_workers_told[0]
    u.env = {**env.flat(), **u.env}
    u.trains = bool(u.launches)
    run = doc.get("run")
    if isinstance(run, str):
        held = holds_forever(run)
        if held is not None:
            u.idles = At(held, doc.value_line("run") + len(run.rstrip().split("\n")) - 1)
    u.mounts, declared = _mounts(doc)
    u.persistent_volume = bool(u.mounts)
    u.workdir = WORKDIR
    if not declared and not u.launches:
        u.persistent_volume = None
    for d in found:
        if d.gpus is not None and d.gpus.value is None and u.gpus is not None and u.gpus.value is not None:
            # Every GPU of a SkyPilot node is the accelerators it was provisioned with.
            d.gpus = At(u.gpus.value, d.gpus.line)
    return [u, *found]
