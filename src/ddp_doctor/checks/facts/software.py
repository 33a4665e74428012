"""Typed facts of the training software: the interpreter, torch's build, NCCL, torchrun, and where an
install remedy points. Each subject reads them its own way (`from_env` on a host, `from_image` from a
rootfs); these readers are the only code that knows the JSON shapes of the report's `facts` section,
which stays the documented contract (docs/report-schema.md).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ddp_doctor.checks.facts.fields import bool_at, float_of, int_at, nonempty, section, str_at, typed
from ddp_doctor.words import plural


@dataclass(frozen=True)
class InstallTarget:
    """Where an install remedy points: this interpreter, its Python version, the driver's CUDA."""

    python: str
    """The interpreter to run `-m pip` with (a host path, or the image's interpreter)."""
    python_version: str | None = None
    driver_cuda: str | None = None
    """The newest CUDA the driver runs; None when unknown (an image, no driver)."""
    has_gpus: bool = False

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> InstallTarget:
        py, gpus = section(facts, "python"), section(facts, "gpus")
        return cls(
            python=str_at(py, "executable", "python") or sys.executable,
            python_version=str_at(py, "version", "python"),
            driver_cuda=str_at(gpus, "cuda_driver_version", "gpus"),
            has_gpus=bool(gpus.get("driver_loaded") and gpus.get("physical_count")),
        )

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> InstallTarget:
        py = section(facts, "python")
        interpreters = py.get("interpreters") or []
        executable = py.get("executable") or (interpreters[0] if interpreters else None)
        # An image is built for GPU nodes whose driver it cannot know.
        return cls(python=str(executable or "python3"), has_gpus=True)


NOT_FOUND = "no training environment found: activate it or pass --python"
"""What `PythonFacts.found=False` means, in the words of the check, `check` and `bench`."""


@dataclass(frozen=True)
class PythonFacts:
    """The interpreter that runs the job, and the torch release it must fit."""

    version: str | None
    implementation: str | None
    executable: str | None
    environment: str
    """In words: 'conda env base', 'venv /opt/venv', 'system interpreter (no venv/conda)'."""
    torch_version: str | None = None
    found: bool = True
    """False when no training environment was found and `executable` is only ddp-doctor's own."""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> PythonFacts:
        py, t = section(facts, "python"), section(facts, "torch")
        chosen = section(facts, "target")
        if py.get("conda_env"):
            where = f"conda env {py['conda_env']}"
        elif py.get("venv"):
            where = f"venv {py.get('prefix')}"
        else:
            where = "system interpreter (no venv/conda)"
        return cls(
            version=typed(py.get("version"), str, "python.version"),
            implementation=typed(py.get("implementation", "CPython"), str, "python.implementation"),
            executable=typed(py.get("executable"), str, "python.executable"),
            environment=where,
            torch_version=nonempty(t.get("version")),
            found=chosen.get("source") != "none",
        )


@dataclass(frozen=True)
class TorchFacts:
    """The torch build as the subject sees it (imported on a host, read from version.py in an image)."""

    installed: bool
    version: str | None
    """The imported torch.__version__ (a host) or torch/version.py's (an image): '2.5.1+cu124'."""
    install: InstallTarget
    metadata_version: str | None = None
    source: str | None = None
    """'import' when `version` came from importing torch; then a different `metadata_version` is a shadow copy."""
    location: str | None = None
    flavour: str | None = None
    """'cuda' | 'rocm' | 'cpu'; None when unknown."""
    cuda: str | None = None
    hip: str | None = None
    cudnn: int | str | None = None
    importable: bool | None = None
    """None: not probed here (an image is read, never run)."""
    distributed: bool | None = None
    backends: Mapping[str, bool | None] = field(default_factory=dict)
    nccl_version: str | None = None
    run_module: bool | None = None
    """`python -m torch.distributed.run` imports; None when not probed."""
    requires: tuple[str, ...] = ()
    """torch's METADATA Requires-Dist (an image reads them; names the NCCL wheel torch expects)."""
    gpus_expected: str | None = None
    """Where GPUs are expected, as words ('on a machine with 2 visible GPUs'); None: no GPU here."""
    import_s: float | None = None
    """Seconds `import torch` took in a fresh interpreter."""
    import_error: str | None = None
    import_stderr_tail: str | None = None
    numpy_probed: bool = False
    """The import child asked for numpy (it does only after torch imported)."""
    numpy: str | None = None
    """numpy's version beside torch; None when it does not import (or was not probed)."""
    arch_list: tuple[str, ...] = ()
    """torch.cuda.get_arch_list(): 'sm_90', 'compute_90'; empty when torch was not imported here."""

    @property
    def usable(self) -> bool:
        """Installed and not known to fail to import (an image's torch is never imported)."""
        return self.installed and self.importable is not False

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> TorchFacts:
        t, gpus = section(facts, "torch"), section(facts, "gpus")
        count = int_at(gpus, "count", "gpus") or 0

        def text(key: str) -> str | None:
            return nonempty(typed(t.get(key), str, f"torch.{key}"))

        return cls(
            installed=bool(t.get("installed")),
            version=text("version"),
            install=InstallTarget.from_env(facts),
            metadata_version=text("metadata_version"),
            source=text("source"),
            location=text("location"),
            flavour=text("flavour"),
            cuda=text("cuda"),
            hip=text("hip"),
            cudnn=typed(t.get("cudnn"), (int, str), "torch.cudnn"),
            importable=typed(t.get("importable"), bool, "torch.importable"),
            distributed=typed(t.get("distributed"), bool, "torch.distributed"),
            backends=dict(typed(t.get("backends"), Mapping, "torch.backends") or {}),
            nccl_version=text("nccl_version"),
            run_module=typed(t.get("run_module"), bool, "torch.run_module"),
            gpus_expected=f"on a machine with {plural(count, 'visible GPU')}" if count else None,
            import_s=float_of(t.get("import_s"), "torch.import_s"),
            import_error=typed(t.get("import_error"), str, "torch.import_error"),
            import_stderr_tail=typed(t.get("import_stderr_tail"), str, "torch.import_stderr_tail"),
            numpy_probed="numpy" in t,
            numpy=typed(t.get("numpy"), str, "torch.numpy") or None,
            arch_list=tuple(typed(t.get("arch_list"), list, "torch.arch_list") or ()),
        )

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> TorchFacts:
        t = section(facts, "torch")
        return cls(
            installed=bool(t.get("installed")),
            version=nonempty(t.get("version")),
            install=InstallTarget.from_image(facts),
            location=nonempty(t.get("location")),
            flavour=nonempty(t.get("flavour")),
            cuda=nonempty(t.get("cuda")),
            hip=nonempty(t.get("hip")),
            backends=dict(section(t, "backends")),
            nccl_version=nonempty(t.get("nccl_version")),
            requires=tuple(str(r) for r in t.get("requires") or []),
            gpus_expected="in an image for GPU training",
        )


@dataclass(frozen=True)
class NcclFacts:
    torch: TorchFacts
    library: str | None
    source: str | None
    """Where the library came from: 'torch/lib', 'nvidia-nccl-cu12', 'static in libtorch_cuda', 'system'."""
    version: str | None
    loadable: bool | None = None
    """None: not loaded here (an image)."""
    error: str | None = None
    package: str | None = None

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> NcclFacts:
        n = section(facts, "nccl")
        return cls(
            torch=TorchFacts.from_env(facts),
            library=str_at(n, "library", "nccl"),
            source=str_at(n, "source", "nccl"),
            version=str_at(n, "version", "nccl"),
            loadable=bool_at(n, "loadable", "nccl"),
            error=str_at(n, "error", "nccl"),
        )

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> NcclFacts:
        n = section(facts, "nccl")
        package = n.get("package")
        return cls(
            torch=TorchFacts.from_image(facts),
            library=nonempty(n.get("library")),
            source=nonempty(n.get("source")),
            version=nonempty(n.get("version")),
            package=nonempty(package.get("name")) if isinstance(package, Mapping) else nonempty(package),
        )


@dataclass(frozen=True)
class TorchrunFacts:
    torch: TorchFacts
    bin_dir: str
    """The bin directory of the Python that has torch: where its torchrun belongs."""
    on_path: str | None
    """The torchrun that PATH finds."""
    script: str | None
    """A torchrun script of this environment, found on PATH or not."""
    shebang_python: str | None = None
    shebang_exists: bool | None = None
    same_env: bool | None = None
    """The shebang's Python is the one that has torch; None when it could not be read."""
    path_var: str | None = None
    path_fixed: bool = False
    """True for an image: its config's PATH is what every container gets, so a miss is a failure."""

    @classmethod
    def from_env(cls, facts: Mapping[str, Any]) -> TorchrunFacts:
        r = section(facts, "torchrun")
        torch = TorchFacts.from_env(facts)
        return cls(
            torch=torch,
            bin_dir=torch.install.python.rsplit("/", 1)[0],
            on_path=str_at(r, "path", "torchrun"),
            script=str_at(r, "env_script", "torchrun") or str_at(r, "path", "torchrun"),
            shebang_python=str_at(r, "shebang_python", "torchrun"),
            same_env=bool_at(r, "same_env", "torchrun"),
        )

    @classmethod
    def from_image(cls, facts: Mapping[str, Any]) -> TorchrunFacts:
        r = section(facts, "torchrun")
        torch = TorchFacts.from_image(facts)
        expected = nonempty(r.get("expected"))
        return cls(
            torch=torch,
            bin_dir=expected.rsplit("/", 1)[0] if expected else torch.install.python.rsplit("/", 1)[0],
            on_path=nonempty(r.get("on_path")),
            script=nonempty(r.get("path")),
            shebang_python=nonempty(r.get("shebang_python")),
            shebang_exists=r.get("shebang_exists") if isinstance(r.get("shebang_exists"), bool) else None,
            same_env=r.get("same_env") if isinstance(r.get("same_env"), bool) else None,
            path_var=nonempty(section(facts, "image").get("path_env")),
            path_fixed=True,
        )
