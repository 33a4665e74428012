"""Does `torchrun` start the Python that has torch?"""

from __future__ import annotations

from ddp_doctor.checks.facts.software import TorchrunFacts
from ddp_doctor.checks.install import install_for
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status


def _not_on_path(f: TorchrunFacts, observed: dict[str, object], fallback: str) -> Finding:
    path = f" ({f.path_var})" if f.path_var else ""
    if f.script or f.torch.run_module:
        where = f"torchrun is at {f.script}" if f.script else f"{f.bin_dir}/torchrun is expected"
        return Finding(
            # An image's config PATH is what every container gets; a shell's PATH changes on activation.
            Status.FAIL if f.path_fixed else Status.WARN,
            f"{where} but not on PATH{path}; expected {f.bin_dir} on PATH"
            + (f" (`{fallback}` works)" if f.torch.run_module else ""),
            cause="the environment's bin directory is not on PATH (an unactivated venv, or an image whose ENV PATH "
            "misses it): `torchrun` in a run command or a Kubernetes manifest fails with 'executable file not found'",
            remedy=f'export PATH={f.bin_dir}:$PATH (Dockerfile: ENV PATH="{f.bin_dir}:$PATH"), '
            f"or launch with `{fallback} ...`",
            observed=observed,
            expected={"path": f"{f.bin_dir}/torchrun"},
        )
    return Finding(
        Status.FAIL,
        "no `torchrun` on PATH and no torchrun script in this environment",
        cause="torch's console scripts were not installed (pip install --no-deps into a target dir, or a copied site-packages)",
        remedy=f"use `{fallback}` or reinstall torch",
        observed=observed,
    )


def _wrong_python(f: TorchrunFacts, observed: dict[str, object], fallback: str) -> Finding:
    python = f.torch.install.python
    missing = f.shebang_exists is False
    problem = "does not exist" if missing else f"is not {python}, the Python that has torch"
    return Finding(
        # A missing interpreter cannot start; another one starts ranks that import another (or no) torch.
        Status.FAIL if missing or f.path_fixed else Status.WARN,
        f"{f.on_path or f.script} runs #!{f.shebang_python}, which {problem}",
        cause="torchrun would start without torch (ModuleNotFoundError), another torch, or not at all: a torchrun "
        "from another environment earlier on PATH, or a venv copied to another path",
        remedy=f"launch with `{fallback}`, put {f.bin_dir} first on PATH, or reinstall torch in its final location",
        observed=observed,
        expected={"shebang_python": python},
    )


def judge(f: TorchrunFacts) -> Finding:
    """Fails when torchrun cannot start torch's Python; warns (fails in an image, whose PATH is fixed)
    when it is not on PATH or belongs to another environment.

    `python -m torch.distributed.run` is the fallback the remedies name: it needs no PATH.
    """
    if not f.torch.installed:
        return skip("torch is not installed")
    fallback = f"{f.torch.install.python} -m torch.distributed.run"
    observed: dict[str, object] = {
        "path": f.on_path or f.script,
        "shebang_python": f.shebang_python,
        "same_env": f.same_env,
        "python_m_torch_distributed_run": f.torch.run_module,
    }
    if f.torch.run_module is False:
        return Finding(
            Status.FAIL,
            "`python -m torch.distributed.run` does not import; expected it to",
            cause="torch.distributed.run (torchrun) is missing or broken in this torch",
            remedy=f"reinstall torch:\n{install_for(f.torch.install, (f.torch.version or '').split('+')[0])} --force-reinstall",
            observed=observed,
        )
    if not f.on_path:
        return _not_on_path(f, observed, fallback)
    if f.shebang_exists is False or f.same_env is False:
        return _wrong_python(f, observed, fallback)
    note = "" if f.same_env else " (its interpreter could not be read)"
    return Finding(Status.PASS, f"{f.on_path} on PATH belongs to the Python that has torch{note}", observed=observed)


CHECK = Check(
    name="torchrun",
    title="torchrun launcher",
    facts=TorchrunFacts,
    judge=judge,
    ids={"env": "env.torchrun", "image": "image.torchrun"},
    order=90,
    tags=frozenset({"environment"}),
)
