"""gather(): every static fact about this environment, as one JSON-able dict.

The parent never imports torch and never initialises CUDA. The slow probes (the torch import
in a child interpreter, NVML) start first and run concurrently with the fast file reads, so
`check --static` costs about one `python -c "import torch"`.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path
from typing import Any, TypedDict

from ddp_doctor import knowledge
from ddp_doctor.env import target as env_target
from ddp_doctor.env.probes import gpu, nccl_probe, network, system, torch_probe
from ddp_doctor.env.probes.interp_child import InterpreterFacts, TorchMetadata
from ddp_doctor.env.probes.nccl_probe import NcclLoad, NetPluginsJson
from ddp_doctor.env.probes.torch_probe import TorchImport
from ddp_doctor.proc import Background

NVML_TIMEOUT_S = 20.0


# facts["torch"] and facts["nccl"] of the report's JSON (checks/facts reads them).
class TorchJson(TypedDict, total=False):
    installed: bool
    version: str | None
    location: str | None
    importable: bool | None
    """None: not tried (--static without the import probe)."""
    import_error: str | None
    import_stderr_tail: str
    cuda: str | None
    hip: str | None
    cudnn: int | None
    flavour: str | None
    """cuda, rocm or cpu."""
    arch_list: list[str]
    distributed: bool | None
    backends: dict[str, bool]
    nccl_version: str | None
    git_version: str | None
    nccl_requirement: str | None
    run_module: bool | None
    source: str
    """files, or import when a child interpreter imported it."""
    metadata_version: str | None
    numpy: str | None
    import_s: float | None
    probe_errors: dict[str, str]


class NcclCandidate(TypedDict):
    source: str
    path: str


class NcclJson(TypedDict, total=False):
    library: str | None
    source: str | None
    loadable: bool | None
    version: str | None
    error: str | None
    candidates: list[NcclCandidate]
    net_plugins: NetPluginsJson


def _torch_facts(meta: TorchMetadata, imported: TorchImport | None, probe_error: str | None) -> TorchJson:
    facts = TorchJson(
        installed=meta["installed"],
        version=meta["version"],
        location=meta["location"],
        importable=None,
        import_error=None,
        cuda=meta["cuda"],
        hip=meta["hip"],
        cudnn=None,
        flavour=None,
        arch_list=[],
        distributed=None,
        backends={"nccl": False, "gloo": False, "mpi": False},
        nccl_version=None,
        git_version=meta.get("git_version"),
        nccl_requirement=meta.get("nccl_requirement"),
        run_module=None,
        source="files",
        metadata_version=meta["version"],
    )
    if imported is not None or probe_error is not None:
        data = imported or TorchImport()
        facts["source"] = "import"
        facts["importable"] = bool(data.get("importable"))
        facts["import_error"] = data.get("import_error") or probe_error
        if data.get("stderr_tail") and facts["import_error"]:
            facts["import_stderr_tail"] = data["stderr_tail"]
        if data.get("importable"):
            facts["version"] = data.get("version") or facts["version"]
            facts["cuda"] = data.get("cuda")
            facts["hip"] = data.get("hip")
            facts["cudnn"] = data.get("cudnn")
            facts["arch_list"] = list(data.get("arch_list") or [])
            dist = data.get("dist")
            facts["distributed"] = dist.get("available") if dist else None
            facts["backends"] = dict((dist.get("backends") if dist else None) or facts["backends"])
            facts["nccl_version"] = data.get("nccl_version")
            facts["numpy"] = data.get("numpy")
            facts["run_module"] = data.get("run_module")
            facts["import_s"] = data.get("import_s")
            if data.get("errors"):
                facts["probe_errors"] = data["errors"]
    if facts["installed"]:
        facts["flavour"] = "rocm" if facts["hip"] else "cuda" if facts["cuda"] else "cpu"
    return facts


def _nccl_facts(
    torch: TorchJson,
    imported: TorchImport | None,
    loaded: NcclLoad | None,
    candidate: tuple[str, str] | None,
    on_disk: list[tuple[str, Path]],
) -> NcclJson:
    facts = NcclJson(library=None, source=None, loadable=None, version=None, error=None, candidates=[])
    mapped = (imported or TorchImport()).get("nccl_loaded")
    if mapped:
        facts.update(
            NcclJson(
                library=mapped,
                source="loaded by torch",
                loadable=True,
                version=(imported or TorchImport()).get("nccl_loaded_version"),
            )
        )
        for src, path in on_disk:
            if str(path) == mapped or mapped.startswith(str(path.parent)):
                facts["source"] = f"loaded by torch from the {src}"
                break
        return facts
    if candidate is not None:
        facts.update(NcclJson(library=candidate[1], source=candidate[0]))
        if loaded is not None:
            facts.update(
                NcclJson(loadable=loaded.get("loadable"), version=loaded.get("version"), error=loaded.get("error"))
            )
    elif torch.get("nccl_version"):
        facts.update(NcclJson(source="statically linked into torch", loadable=True, version=torch.get("nccl_version")))
    return facts


def _warm_up() -> None:
    """The parent is idle while the child imports torch: load what judging and rendering need now."""
    knowledge.releases()
    knowledge.load_mapping("variables.yaml")
    knowledge.import_errors()
    knowledge.driver_floor("12.0")
    try:
        importlib.import_module("ddp_doctor.render.text")
    except ImportError:
        pass


def gather(
    probe_torch: bool = True, target: env_target.Target | None = None, route_to: str | None = None
) -> dict[str, Any]:
    """Every static fact about the target environment (default: `target.resolve()`, see env/target.py).
    `route_to`: the host whose route ranks the interfaces (default: $MASTER_ADDR, else the default route)."""
    started = time.monotonic()
    target = target or env_target.resolve()
    gpu_job = Background("the NVML probe", gpu.probe)
    described = env_target.describe(target)
    meta = described["torch"]
    torch_job = (
        Background("the torch import probe", lambda: torch_probe.run_import(python=target.python))
        if probe_torch and meta["installed"]
        else None
    )
    packages = [(str(src), Path(path)) for src, path in described.get("nccl_packages") or []]
    nccl_candidates = nccl_probe.candidates(meta["location"], packages)
    first = (nccl_candidates[0][0], str(nccl_candidates[0][1])) if nccl_candidates else None
    nccl_job = (
        Background("the NCCL load probe", lambda: nccl_probe.load(first[1]))
        if first is not None and torch_job is None
        else None
    )
    facts = _fast_facts(target, described, route_to)

    _warm_up()
    gpus, gpu_error = gpu_job.result(NVML_TIMEOUT_S)
    facts["gpus"] = gpus or gpu.nothing_seen(None, gpu_error)  # NVML did not answer
    facts["topology"] = {"pairs": facts["gpus"].get("topology", [])}

    imported, import_error = torch_job.result(torch_probe.IMPORT_TIMEOUT_S + 10) if torch_job else (None, None)
    facts["torch"] = _torch_facts(meta, imported, import_error)

    loaded: NcclLoad | None = None
    if nccl_job is not None:
        loaded, err = nccl_job.result(nccl_probe.LOAD_TIMEOUT_S + 5)
        loaded = loaded or NcclLoad(loadable=False, version=None, error=err)
    elif first is not None and not (imported or TorchImport()).get("nccl_loaded"):
        loaded = nccl_probe.load(first[1])
    nccl = _nccl_facts(facts["torch"], imported, loaded, first, nccl_candidates)
    nccl["candidates"] = [NcclCandidate(source=s, path=str(p)) for s, p in nccl_candidates]
    # Where NCCL would find an external network plugin: NCCL_NET can only name IB, Socket or one of them.
    nccl["net_plugins"] = nccl_probe.net_plugins(facts["env"], meta["location"], nccl["library"])
    if nccl["library"] is None and nccl["version"] is None:
        static = nccl_probe.static_in_torch(meta["location"])
        if static:
            nccl.update(NcclJson(library=static, source="statically linked into libtorch_cuda", loadable=None))
    facts["nccl"] = nccl
    facts["gather_s"] = round(time.monotonic() - started, 3)
    return facts


def _fast_facts(target: env_target.Target, described: InterpreterFacts, route_to: str | None) -> dict[str, Any]:
    """The facts that need neither torch nor NVML: read while those probes run."""
    return {
        "target": target.to_dict(),
        "python": described["python"],
        "torchrun": system.torchrun(target.python),
        "shm": system.shm(),
        "ulimits": system.ulimits(),
        "container": system.container(),
        "user": system.user(),
        "env": system.env_vars(),
        "network": {
            "interfaces": [i.to_dict() for i in network.interfaces()],
            "infiniband": system.infiniband(),
            "route": network.route(route_to or os.environ.get("MASTER_ADDR")).to_dict(),
        },
    }
