"""Verdicts over an image's facts: can this image run DDP on GPUs, and how should it be started?"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ddp_doctor.checks import table
from ddp_doctor.checks import user as user_check
from ddp_doctor.checks.facts import UserFacts
from ddp_doctor.report import Result, Status

Facts = dict[str, Any]


def gpu_flags() -> str:
    return f"--gpus all --shm-size={table.shm().docker_size(None)} --ulimit memlock=-1 --ulimit stack=67108864"


def _knowledge() -> Any:
    try:
        from ddp_doctor.env import knowledge
    except ImportError:  # the release tables are optional for the audit
        return None
    return knowledge


def integrity(f: Facts) -> Result:
    img = f["image"]
    if not img.get("verified_blobs"):
        return Result(
            "image.integrity",
            "Image integrity",
            Status.SKIP,
            f"{img['format']}: {img.get('note', 'no digests to verify')}",
        )
    return Result(
        "image.integrity",
        "Image integrity",
        Status.PASS,
        f"{img['verified_blobs']} blobs match their sha256 digests; {img['layer_count']} "
        f"layer{'' if img['layer_count'] == 1 else 's'}, "
        f"{img['uncompressed_bytes'] / 1e9:.2f} GB uncompressed, {img['entries']} entries",
        observed={"format": img["format"], "layers": img["layer_count"]},
        metrics={"size_bytes": img["uncompressed_bytes"], "layers_count": img["layer_count"]},
    )


def python(f: Facts) -> Result:
    py = f["python"]
    if not py["interpreters"]:
        return Result(
            "image.python",
            "Python interpreter",
            Status.FAIL,
            "no python interpreter in any bin/ directory of the image",
            cause="torchrun and the training script need Python inside the image",
            remedy="build FROM an image with Python (e.g. python:3.12-slim or pytorch/pytorch)",
            observed={"interpreters": []},
            expected={"interpreters": ">= 1"},
        )
    shown = ", ".join(py["interpreters"][:6])
    return Result(
        "image.python",
        "Python interpreter",
        Status.PASS,
        f"{len(py['interpreters'])} interpreter(s): {shown}; torch's is {py['executable'] or 'unknown'}",
        observed={"interpreters": py["interpreters"], "site_packages": py["site_packages"]},
    )


def torch(f: Facts) -> Result:
    t = f["torch"]
    if not t["installed"]:
        return Result(
            "image.torch",
            "PyTorch build",
            Status.FAIL,
            "no torch/version.py in any site-packages of the image",
            cause="PyTorch is not installed in the image",
            remedy="install an official CUDA wheel, e.g. pip install torch --index-url https://download.pytorch.org/whl/cu126",
            observed={"site_packages": f["python"]["site_packages"]},
            expected={"torch": "installed"},
        )
    observed = {"version": t["version"], "cuda": t["cuda"], "hip": t["hip"], "location": t["location"]}
    if t["flavour"] == "cpu":
        k = _knowledge()
        rel = k.release(t["version"] or "") if k else None
        variant = rel["cuda_variants"][-1] if rel and rel["cuda_variants"] else "cu126"
        base = (t["version"] or "").split("+")[0]
        return Result(
            "image.torch",
            "PyTorch build",
            Status.FAIL,
            f"torch {t['version']} is a CPU-only build (torch.version.cuda is None); expected a CUDA build for GPU training",
            cause="a CPU wheel has no CUDA kernels and no NCCL: DDP runs only with gloo on CPUs",
            remedy=f"install a CUDA wheel: pip install 'torch=={base}' --index-url https://download.pytorch.org/whl/{variant}",
            observed=observed,
            expected={"cuda": "a CUDA version"},
        )
    return Result(
        "image.torch",
        "PyTorch build",
        Status.PASS,
        f"torch {t['version']} built for {'CUDA ' + t['cuda'] if t['cuda'] else 'ROCm ' + str(t['hip'])} at {t['location']}",
        observed=observed,
    )


def official_build(f: Facts) -> Result:
    t = f["torch"]
    rid, title = "image.official_build", "Official torch/CUDA pair"
    if not t["installed"] or t["flavour"] != "cuda":
        return Result(rid, title, Status.SKIP, "no CUDA build of torch to compare with the release table")
    k = _knowledge()
    if k is None:
        return Result(rid, title, Status.SKIP, "the release tables (ddp_doctor.env.knowledge) are not available")
    variant = k.variant_of(t["cuda"])
    variants = k.official_variants(t["version"] or "")
    observed = {"version": t["version"], "variant": variant}
    if variants is None:
        return Result(
            rid,
            title,
            Status.SKIP,
            f"torch {t['version']} is not in the release table; cannot tell whether {variant} was shipped",
            observed=observed,
        )
    local = (t["version"] or "").partition("+")[2]
    if variant in variants and (not local or local == variant):
        return Result(
            rid,
            title,
            Status.PASS,
            f"torch {t['version']} with CUDA {t['cuda']} ({variant}) is an official wheel variant",
            observed=observed,
            expected={"variants": variants},
        )
    base = (t["version"] or "").split("+")[0]
    return Result(
        rid,
        title,
        Status.WARN,
        f"torch {t['version']} reports CUDA {t['cuda']} ({variant}); official wheels of this release are {', '.join(variants)}",
        cause="a source or third-party build: its NCCL, arch list and driver needs are not the ones the release tables record",
        remedy=f"prefer an official wheel, e.g. pip install 'torch=={base}' --index-url https://download.pytorch.org/whl/{variants[-1]}",
        observed=observed,
        expected={"variants": variants},
    )


def nccl(f: Facts) -> Result:
    t, n = f["torch"], f["nccl"]
    rid, title = "image.nccl", "NCCL library"
    if t["flavour"] != "cuda":
        return Result(
            rid,
            title,
            Status.SKIP,
            f"torch is {'absent' if not t['installed'] else t['flavour']}: NCCL only matters for a CUDA build",
        )
    req = next((r for r in t.get("requires") or [] if r.lower().startswith("nvidia-nccl")), None)
    observed = {
        "library": n["library"],
        "source": n["source"],
        "version": n["version"],
        "package": n.get("package"),
        "torch_requires": req,
    }
    if n["library"] is None:
        why = (
            f"torch's METADATA requires {req.split(';')[0].strip()}, which is not installed"
            if req
            else "no libnccl.so in torch/lib, in an nvidia-nccl-cu* wheel or on the system, and libtorch_cuda does not carry it"
        )
        return Result(
            rid,
            title,
            Status.FAIL,
            f"torch {t['version']} is a CUDA build but the image holds no NCCL: this image cannot run DDP on GPUs",
            cause=why,
            remedy=(
                f"pip install '{req.split(';')[0].strip()}' in the image"
                if req
                else "install NCCL matching torch's CUDA (pip install nvidia-nccl-cu12, or the libnccl2 package), "
                "or use an official torch CUDA wheel, which brings it"
            ),
            observed=observed,
            expected={"library": "libnccl.so.2"},
        )
    k = _knowledge()
    expected_version = None
    if k is not None and t["version"]:
        rel = k.release(t["version"])
        expected_version = (rel or {}).get("nccl", {}).get(k.variant_of(t["cuda"]))
    summary = f"NCCL {n['version'] or '(version unknown)'} from {n['source']}: {n['library']}"
    if expected_version and n["version"] and n["version"] != expected_version and n["source"] != "torch/lib":
        return Result(
            rid,
            title,
            Status.WARN,
            f"{summary}; the official wheel of torch {t['version']} uses NCCL {expected_version}",
            cause="a different NCCL than the one torch was tested with; most versions work, some regress",
            remedy=f"pip install 'nvidia-nccl-cu{(t['cuda'] or '12').split('.')[0]}=={expected_version}' unless you pinned it on purpose",
            observed=observed,
            expected={"version": expected_version},
        )
    return Result(
        rid,
        title,
        Status.PASS,
        summary,
        observed=observed,
        expected={"version": expected_version} if expected_version else {},
    )


def _cuda_lib(key: str, rid: str, title: str, why: str) -> Callable[[Facts], Result]:
    def rule(f: Facts) -> Result:
        t, lib = f["torch"], f[key]
        if t["flavour"] != "cuda":
            return Result(rid, title, Status.SKIP, "no CUDA build of torch")
        if lib["library"] is None:
            return Result(
                rid,
                title,
                Status.WARN,
                f"no {title} library found for torch {t['version']} (CUDA {t['cuda']})",
                cause=why,
                remedy="use an official torch CUDA wheel (it brings the nvidia-* runtime wheels) or a CUDA runtime base image",
                observed={"library": None},
                expected={"library": "present"},
            )
        return Result(
            rid,
            title,
            Status.PASS,
            f"{title} {lib['version'] or '(version unknown)'} from {lib['source']}: {lib['library']}",
            observed={"library": lib["library"], "version": lib["version"], "source": lib["source"]},
        )

    return rule


cudnn = _cuda_lib("cudnn", "image.cudnn", "cuDNN", "convolutions fail at the first use; DDP itself does not need cuDNN")
cuda_runtime = _cuda_lib(
    "cuda_runtime",
    "image.cuda_runtime",
    "CUDA runtime",
    "`import torch` fails with a missing libcudart unless it is linked in statically",
)


def torchrun(f: Facts) -> Result:
    r, t = f["torchrun"], f["torch"]
    rid, title = "image.torchrun", "torchrun launcher"
    path_var = f["image"]["path_env"]
    if not t["installed"]:
        return Result(rid, title, Status.SKIP, "no torch, so no torchrun to check")
    if r["path"] is None:
        return Result(
            rid,
            title,
            Status.FAIL,
            f"no torchrun script in the image (expected {r['expected']})",
            cause="the torch console scripts were not installed (pip install --no-deps into a target dir, or a copied site-packages)",
            remedy=f"reinstall torch with pip in the image, or launch with `{f['python']['executable'] or 'python'} -m torch.distributed.run`",
            observed={"torchrun": None},
            expected={"torchrun": r["expected"]},
        )
    if r["on_path"] is None:
        bindir = r["path"].rsplit("/", 1)[0]
        return Result(
            rid,
            title,
            Status.FAIL,
            f"torchrun is at {r['path']} but not on the image's PATH ({path_var})",
            cause="`torchrun` in a run command or a Kubernetes manifest will fail with 'executable file not found'",
            remedy=f'ENV PATH="{bindir}:$PATH" in the Dockerfile, or call {r["path"]} by its full path',
            observed={"path": r["path"], "PATH": path_var},
            expected={"PATH": f"contains {bindir}"},
        )
    if r["shebang_python"] and (r["shebang_exists"] is False or r["same_env"] is False):
        problem = (
            "does not exist in the image"
            if r["shebang_exists"] is False
            else f"is not the Python that has torch ({f['python']['executable']})"
        )
        return Result(
            rid,
            title,
            Status.FAIL,
            f"torchrun's shebang #!{r['shebang']} {problem}",
            cause="torchrun would start without torch (ModuleNotFoundError) or not start at all; typical after copying a venv to another path",
            remedy=f"reinstall torch in its final location, or launch with `{f['python']['executable'] or 'python'} -m torch.distributed.run`",
            observed={"path": r["path"], "shebang": r["shebang"]},
            expected={"shebang": f["python"]["executable"]},
        )
    return Result(
        rid,
        title,
        Status.PASS,
        f"torchrun at {r['on_path']} on PATH; shebang #!{r['shebang']} is torch's Python",
        observed={"path": r["on_path"], "shebang": r["shebang"]},
    )


def user(f: Facts) -> Result:
    return user_check.CHECK.run(UserFacts.from_image(f), "image")


def env(f: Facts) -> Result:
    cfg = f["image"].get("config")
    if cfg is None:
        return Result("image.env", "Distributed environment variables", Status.SKIP, "a rootfs has no config Env")
    variables = {
        k: v
        for k, v in f["image"]["env"].items()
        if k.startswith(("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED", "GLOO_"))
    }
    k = _knowledge()
    rules = (k.env_rules().get("rules") if k else None) or []
    warnings = []
    for rule in rules:
        value = variables.get(rule["name"])
        if value is not None and rule.get("status") == "warn" and rule.get("when") in ("set", value):
            warnings.append((rule["name"], value, rule))
    if warnings:
        rule = warnings[0][2]
        return Result(
            "image.env",
            "Distributed environment variables",
            Status.WARN,
            f"the image sets {', '.join(f'{n}={v}' for n, v, _ in warnings)}: {rule['says']}",
            cause="variables baked into an image apply to every job on every cluster",
            remedy=f"remove it from the Dockerfile ENV; set it per job if needed. {rule.get('remedy') or ''}".strip(),
            observed={"env": variables},
        )
    shown = ", ".join(f"{k}={v}" for k, v in variables.items()) or "none"
    return Result(
        "image.env",
        "Distributed environment variables",
        Status.PASS,
        f"NCCL/torch.distributed variables set in the image: {shown}",
        observed={"env": variables},
    )


def entrypoint(f: Facts) -> Result:
    cfg = f["image"].get("config")
    if cfg is None:
        return Result("image.entrypoint", "Entrypoint and command", Status.SKIP, "a rootfs has no Entrypoint/Cmd")
    ep, cmd, wd = cfg.get("Entrypoint"), cfg.get("Cmd"), cfg.get("WorkingDir")
    return Result(
        "image.entrypoint",
        "Entrypoint and command",
        Status.PASS,
        f"Entrypoint={ep!r} Cmd={cmd!r} WorkingDir={wd or '/'!r}",
        observed={"Entrypoint": ep, "Cmd": cmd, "WorkingDir": wd, "Labels": cfg.get("Labels") or {}},
    )


def run_command(f: Facts) -> Result:
    name = f["image"].get("name") or "IMAGE"
    launcher = f["torchrun"].get("on_path") and "torchrun" or f["torchrun"].get("path") or "torchrun"
    ep = (f["image"].get("config") or {}).get("Entrypoint")
    entry = " --entrypoint ''" if ep else ""
    docker = f"docker run --rm{entry} {gpu_flags()} {name} \\\n  {launcher} --standalone --nproc-per-node=gpu train.py"
    k8s = (
        "containers:\n"
        f"- name: train\n  image: {name}\n"
        f'  command: ["{launcher}", "--standalone", "--nproc-per-node=gpu", "train.py"]\n'
        "  resources:\n    limits:\n      nvidia.com/gpu: 8\n"
        "  volumeMounts:\n  - {name: dshm, mountPath: /dev/shm}\n"
        "volumes:\n- name: dshm\n  emptyDir: {medium: Memory, sizeLimit: " + table.shm().k8s_size(None) + "}"
    )
    remedy = (
        f"{docker}\n\npodman: replace --gpus all with --device nvidia.com/gpu=all (CDI)\n\nKubernetes:\n{k8s}\n\n"
        f"then verify for real on a GPU node: ddp-doctor check --image {name}"
    )
    return Result(
        "image.run_command",
        "How to run it",
        Status.PASS,
        "start it with GPUs, a large /dev/shm and unlimited locked memory (DataLoader workers and NCCL need both)",
        remedy=remedy,
        observed={"docker": docker, "kubernetes": k8s},
    )


RULES: tuple[Callable[[Facts], Result], ...] = (
    integrity,
    python,
    torch,
    official_build,
    nccl,
    cuda_runtime,
    cudnn,
    torchrun,
    user,
    env,
    entrypoint,
    run_command,
)


def evaluate(facts: Facts) -> list[Result]:
    return [rule(facts) for rule in RULES]
