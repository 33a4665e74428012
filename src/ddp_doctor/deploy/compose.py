"""LaunchSpec -> a docker compose file (one service; one host per compose project)."""

from __future__ import annotations

from ddp_doctor.deploy.manifests import (
    ComposeDeploy,
    ComposeDevice,
    ComposeFile,
    ComposeLimits,
    ComposeReservations,
    ComposeResources,
    ComposeService,
    DependsOn,
    Ulimits,
)
from ddp_doctor.deploy.serialize import Expand, yaml_documents
from ddp_doctor.deploy.spec import PREFLIGHT_S, LaunchSpec, gib_text


def literal(word: str) -> str:
    """Compose interpolates $VAR everywhere; the user's own `$` must reach the container as is."""
    return str(word) if isinstance(word, Expand) else word.replace("$", "$$")


PREFLIGHT = "preflight"


def service(spec: LaunchSpec, command: list[str] | None = None) -> ComposeService:
    """The job's service; `command` replaces its command (the preflight's check)."""
    # Compose interpolates ${VAR:?message} itself: a missing variable stops `up` with that message.
    node_rank = "${NODE_RANK:?set NODE_RANK to this node's rank}"
    master = "${MASTER_ADDR:?set MASTER_ADDR to node 0's address}"
    command = command or spec.entrypoint(
        node_rank=node_rank, rdzv_host=master, rdzv_id=f"{spec.name}-${{RUN_ID:?set RUN_ID}}"
    )
    svc = ComposeService(image=spec.image, command=[literal(w) for w in command], user=f"{spec.uid}:{spec.gid}")
    if spec.ipc_host:
        svc["ipc"] = "host"
    else:
        svc["shm_size"] = gib_text(spec.shm, "compose")
    svc["ulimits"] = Ulimits(memlock=-1, stack=67108864)
    if spec.multi_node:
        svc["network_mode"] = "host"
    svc["environment"] = {k: literal(v) for k, v in spec.env}
    svc["volumes"] = [
        literal(f"{m.source}:{m.target}" + (":ro" if m.read_only else ""))
        for m in (*spec.data, spec.log_mount(kubernetes=False))
    ]
    limits = ComposeLimits(
        cpus=str(spec.cpu_count), memory=gib_text(spec.memory + (0 if spec.ipc_host else spec.shm), "compose")
    )
    resources = ComposeResources(limits=limits)
    if spec.gpus_per_node:
        resources["reservations"] = ComposeReservations(devices=[_gpus(spec)])
    svc["deploy"] = ComposeDeploy(resources=resources)
    return svc


def _gpus(spec: LaunchSpec) -> ComposeDevice:
    device = ComposeDevice(driver="nvidia", capabilities=["gpu"])
    if spec.all_devices:
        device["count"] = "all"
    elif spec.devices:
        device["device_ids"] = list(spec.devices)
    else:
        device["count"] = spec.gpus_per_node
    return device


def to_dict(spec: LaunchSpec) -> ComposeFile:
    if not spec.preflight:
        return ComposeFile(name=spec.name, services={spec.name: service(spec)})
    # The check runs first in a service like the job's; `up` starts the job only if it exits 0, else stops
    # with "service preflight didn't complete successfully: exit N".
    check = service(spec, ["timeout", "-k", "5", str(PREFLIGHT_S - 5), *spec.preflight_command()])
    job = service(spec)
    job["depends_on"] = {PREFLIGHT: DependsOn(condition="service_completed_successfully")}
    return ComposeFile(name=spec.name, services={PREFLIGHT: check, spec.name: job})


def render(spec: LaunchSpec) -> str:
    header = (
        f"ddp-doctor launch --target compose: {spec.shape}\n"
        f"{spec.image_needs}\n"
        "shm_size: Docker's default /dev/shm is 64 MB, too small for DataLoader workers and NCCL's shm transport.\n"
        "ulimits.memlock -1: NCCL / RDMA pin host memory."
    )
    if spec.preflight:
        header += (
            f"\nPreflight: the service {PREFLIGHT} runs {' '.join(spec.preflight_command())} first (at most {PREFLIGHT_S} s, "
            "coreutils timeout in the image); the job starts only if it passes."
        )
    if spec.multi_node:
        header += (
            "\nRun `docker compose up` on every node with NODE_RANK=0..N-1, MASTER_ADDR=node 0, one RUN_ID;\n"
            "network_mode host: the other nodes must reach the rendezvous and NCCL ports."
        )
    return yaml_documents([to_dict(spec)], header)
