"""What the audit looks for in a merged image tree: interpreters, torch, NCCL, cuDNN, CUDA, torchrun.

Pure functions of (Tree, config); they return JSON-able facts in the shape `env.facts` uses
for a host, so the same words and ids describe an image and a machine.
"""

from __future__ import annotations

import ast
import posixpath
import re
from dataclasses import dataclass, field
from email.parser import HeaderParser
from typing import TypedDict

from ddp_doctor.image.archive import ContainerConfig, ImageConfig, Policy
from ddp_doctor.image.tree import DIR, FILE, SYMLINK, Tree

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""What docker and podman put in PATH when the image config sets none."""

_SP = r"(?:.*/)?lib/python\d+\.\d+/(?:site|dist)-packages"
# Content the audit reads, by path; everything else is kept as metadata only.
KEEP: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(_SP + r"/torch/version\.py$"), 64 << 10),
    (re.compile(_SP + r"/torch-[^/]+\.dist-info/METADATA$"), 256 << 10),
    (re.compile(_SP + r"/nvidia_[a-z0-9_]+-[^/]+\.dist-info/METADATA$"), 64 << 10),
    (re.compile(r".*/bin/torchrun$"), 512),
    (re.compile(r"^/(?:etc|usr/lib)/os-release$"), 8 << 10),
)
# Files streamed through a marker search: is NCCL linked into libtorch_cuda statically or dynamically?
SCAN: tuple[tuple[re.Pattern[str], tuple[bytes, ...]], ...] = (
    (re.compile(_SP + r"/torch/lib/libtorch_cuda[^/]*\.so$"), (b"libnccl.so", b"NCCL version")),
)
_INTERP = re.compile(r"^python\d(?:\.\d+)?$")
_LIB = {
    "nccl": re.compile(r"^libnccl\.so(?:\.\d+)*$"),
    "cudnn": re.compile(r"^libcudnn\.so(?:\.\d+)*$"),
    "cuda_runtime": re.compile(r"^libcudart(?:-[0-9a-f]+)?\.so(?:\.\d+)*$"),
}
_DIST = re.compile(r"^(torch|nvidia_nccl_cu\d+|nvidia_cudnn_cu\d+|nvidia_cuda_runtime_cu\d+)-([^-/]+)\.dist-info$")
_SO_VERSION = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")
_IN_SITE = re.compile(r"/(?:site|dist)-packages/")


def policy() -> Policy:
    def keep(path: str) -> int:
        return next((n for rx, n in KEEP if rx.match(path)), 0)

    def scan(path: str) -> tuple[bytes, ...]:
        return next((m for rx, m in SCAN if rx.match(path)), ())

    return Policy(keep=keep, scan=scan)


@dataclass
class Inventory:
    interpreters: list[str] = field(default_factory=list)
    site_packages: list[str] = field(default_factory=list)
    libs: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in _LIB})
    dists: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """Normalised distribution name -> [(version from the dist-info name, dist-info path)]."""
    torchruns: list[str] = field(default_factory=list)


def inventory(tree: Tree) -> Inventory:
    inv = Inventory()
    for path, node in tree.walk():
        parent, _, name = path.rpartition("/")
        if node.kind == DIR:
            if name in ("site-packages", "dist-packages") and re.search(r"/lib/python\d+\.\d+$", parent):
                inv.site_packages.append(path)
            elif name.endswith(".dist-info"):
                m = _DIST.match(name)
                if m:
                    inv.dists.setdefault(m.group(1).replace("_", "-"), []).append((m.group(2), path))
            continue
        if parent.endswith("/bin"):
            if _INTERP.match(name) and node.kind in (FILE, SYMLINK):
                inv.interpreters.append(path)
            elif name == "torchrun":
                inv.torchruns.append(path)
        for key, rx in _LIB.items():
            if rx.match(name):
                inv.libs[key].append(path)
    for values in (inv.interpreters, inv.site_packages, inv.torchruns, *inv.libs.values()):
        values.sort()
    return inv


def parse_version_py(source: bytes) -> dict[str, str | None]:
    """The literal assignments of torch/version.py (`__version__`, `cuda`, `hip`, `git_version`); never executed."""
    try:
        module = ast.parse(source.decode("utf-8", "replace"))
    except (SyntaxError, ValueError):
        return {}
    out: dict[str, str | None] = {}
    for stmt in module.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign):
            target, value = stmt.target, stmt.value
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Constant)
            and (value.value is None or isinstance(value.value, str))
        ):
            out[target.id] = value.value
    return out


class WheelMetadata(TypedDict):
    name: str | None
    version: str | None
    requires: list[str]


# The image's facts (facts["torch"], ["nccl"], ...; image/subject.py reads them): env.facts' shapes where the
# same fact is read from a host, plus where each thing lives in the image.
class ImageTorchFacts(TypedDict, total=False):
    installed: bool
    version: str | None
    location: str | None
    importable: bool | None
    import_error: str | None
    cuda: str | None
    hip: str | None
    cudnn: int | None
    flavour: str | None
    arch_list: list[str]
    distributed: bool | None
    backends: dict[str, bool | None]
    nccl_version: str | None
    all_locations: list[str]
    environments: list[TorchEnvironment]
    chosen_because: str
    git_version: str | None
    site_packages: str
    prefix: str
    python_tag: str
    """python3.11: the directory under lib/ of torch's site-packages."""
    requires: list[str]


class LibPackage(TypedDict):
    name: str
    version: str | None
    dist_info: str


class LibtorchCuda(TypedDict):
    path: str
    links_libnccl: bool
    nccl_inside: bool


class LibFacts(TypedDict, total=False):
    library: str | None
    source: str | None
    version: str | None
    all: list[str]
    package: LibPackage | None
    libtorch_cuda: LibtorchCuda


class ImageTorchrunFacts(TypedDict):
    path: str | None
    on_path: str | None
    expected: str | None
    """The torchrun of torch's own environment."""
    shebang: str | None
    shebang_python: str | None
    shebang_exists: bool | None
    same_env: bool | None
    all: list[str]


class ImagePythonFacts(TypedDict):
    interpreters: list[str]
    broken_interpreters: dict[str, str]
    site_packages: list[str]
    executable: str | None
    version: str | None
    prefix: str | None


def parse_metadata(data: bytes) -> WheelMetadata:
    """Name, Version and Requires-Dist of a wheel's METADATA (RFC 822 headers)."""
    msg = HeaderParser().parsestr(data.decode("utf-8", "replace").split("\n\n", 1)[0])
    return WheelMetadata(name=msg.get("Name"), version=msg.get("Version"), requires=msg.get_all("Requires-Dist") or [])


def shebang(data: bytes | None) -> list[str] | None:
    if not data or not data.startswith(b"#!"):
        return None
    line = data[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return line.split() or None


def env_of(config: ImageConfig | None) -> dict[str, str]:
    cfg = (config or ImageConfig()).get("config") or ContainerConfig()
    out: dict[str, str] = {}
    for item in cfg.get("Env") or []:
        if isinstance(item, str):
            key, _, value = item.partition("=")
            out[key] = value
    return out


def which(tree: Tree, name: str, path_var: str) -> str | None:
    for d in path_var.split(":"):
        if not d.startswith("/"):
            continue
        found = tree.lookup(f"{d}/{name}")
        if found and found[1].kind == FILE:
            return f"{d.rstrip('/')}/{name}"
    return None


def realdir(tree: Tree, path: str) -> str | None:
    """The directory of `path` with links resolved, keeping the last component as named (venv semantics)."""
    parent, _, _ = path.rpartition("/")
    found = tree.lookup(parent or "/")
    return found[0] if found else None


_SCRATCH = ("/tmp/", "/var/tmp/", "/home/", "/root/")


class TorchEnvironment(TypedDict):
    """One Python environment of the image that has torch (facts["torch"]["environments"])."""

    prefix: str
    site_packages: str
    version: str | None
    cuda: str | None
    on_path: bool


def _environment(site_packages: str, version: dict[str, str | None], on_path: bool) -> TorchEnvironment:
    return TorchEnvironment(
        prefix=site_packages.split("/lib/python")[0] or "/",
        site_packages=site_packages,
        version=version.get("__version__"),
        cuda=version.get("cuda"),
        on_path=on_path,
    )


def _chosen_because(sp: str, rank: tuple[int, int, str], environments: int, path_entries: int) -> str:
    """Why the first of the ranked environments is the image's torch."""
    if rank[0] < path_entries:
        return f"its bin ({sp.split('/lib/python')[0] or '/'}/bin) comes first on the image's PATH"
    if environments == 1:
        return "it is the only environment with torch"
    if not rank[1]:
        return "none is on PATH; it is in a system location, not under /tmp or a home directory"
    return "none is on PATH; first by path"


def torch_facts(tree: Tree, inv: Inventory, path_var: str) -> ImageTorchFacts:
    """facts["torch"] of env.facts' shape, plus where it lives; the torch first on PATH wins."""
    found = []
    for sp in inv.site_packages:
        data = tree.read(f"{sp}/torch/version.py")
        if data is not None:
            found.append((sp, parse_version_py(data)))
    out = ImageTorchFacts(
        installed=bool(found),
        version=None,
        location=None,
        importable=None,
        import_error=None,
        cuda=None,
        hip=None,
        cudnn=None,
        flavour=None,
        arch_list=[],
        distributed=None,
        backends={},
        nccl_version=None,
        all_locations=[sp + "/torch" for sp, _ in found],
    )
    if not found:
        return out
    order = [d.rstrip("/") for d in path_var.split(":")]

    def rank(item: tuple[str, dict[str, str | None]]) -> tuple[int, int, str]:
        # First on PATH (what `torchrun` / `python` in the image run); then system-wide locations
        # before someone's scratch venv under /tmp or a home directory; then by path.
        prefix = item[0].split("/lib/python")[0]
        on_path = order.index(prefix + "/bin") if prefix + "/bin" in order else len(order)
        scratch = int(prefix.startswith(_SCRATCH))
        return on_path, scratch, prefix

    ranked = sorted(found, key=rank)
    sp, version = ranked[0]
    out["environments"] = [_environment(e[0], e[1], rank(e)[0] < len(order)) for e in ranked]
    out["chosen_because"] = _chosen_because(sp, rank(ranked[0]), len(ranked), len(order))
    prefix, _, rest = sp.rpartition("/lib/")
    out.update(
        ImageTorchFacts(
            version=version.get("__version__"),
            location=f"{sp}/torch",
            cuda=version.get("cuda"),
            hip=version.get("hip"),
            git_version=version.get("git_version"),
            site_packages=sp,
            prefix=prefix or "/",
            python_tag=rest.split("/")[0],
        )
    )
    out["flavour"] = "cuda" if out.get("cuda") else "rocm" if out.get("hip") else "cpu"
    meta = next((tree.read(f"{p}/METADATA") for v, p in inv.dists.get("torch", []) if p.startswith(sp + "/")), None)
    out["requires"] = parse_metadata(meta)["requires"] if meta else []
    return out


def lib_facts(
    tree: Tree, inv: Inventory, key: str, dist_prefix: str, torch: ImageTorchFacts, markers: dict[str, set[bytes]]
) -> LibFacts:
    """Where a CUDA library comes from: inside torch/lib, a nvidia-* wheel, the system, or static."""
    sp = torch.get("site_packages") or ""
    # torch's own environment, or the system; a copy inside another environment's site-packages is not torch's
    paths = [p for p in inv.libs[key] if (sp and p.startswith(sp + "/")) or not _IN_SITE.search(p)]
    dists = [(name, v, p) for name, items in inv.dists.items() if name.startswith(dist_prefix) for v, p in items]
    dist = next(((n, v, p) for n, v, p in dists if p.startswith(sp + "/")), dists[0] if dists else None)

    def source(path: str) -> str:
        if sp and path.startswith(f"{sp}/torch/lib/"):
            return "torch/lib"
        if sp and path.startswith(f"{sp}/nvidia/"):
            return dist[0] if dist else "nvidia wheel"
        return "system"

    def rank(path: str) -> int:
        return {"torch/lib": 0, "system": 2}.get(source(path), 1)

    ranked = sorted(paths, key=rank)
    out = LibFacts(library=None, source=None, version=None, all=paths, package=None)
    if dist:
        meta = tree.read(f"{dist[2]}/METADATA")
        version = (parse_metadata(meta)["version"] if meta else None) or dist[1]
        out["package"] = LibPackage(name=dist[0], version=version, dist_info=dist[2])
    if ranked:
        lib = ranked[0]
        out.update(LibFacts(library=lib, source=source(lib)))
        m = _SO_VERSION.search(lib)
        so_version = m.group(1) if m and m.group(1).count(".") >= 2 else None
        package = out.get("package")
        out["version"] = (
            (package["version"] if package else None)
            if out.get("source") not in ("torch/lib", "system")
            else so_version
        )
        out["version"] = out["version"] or so_version
    if key == "nccl":
        for path, found in markers.items():
            if sp and path.startswith(f"{sp}/torch/lib/libtorch_cuda"):
                inside = LibtorchCuda(
                    path=path,
                    links_libnccl=b"libnccl.so" in found,
                    nccl_inside=b"NCCL version" in found and b"libnccl.so" not in found,
                )
                out["libtorch_cuda"] = inside
                if out.get("library") is None and inside["nccl_inside"]:
                    out.update(LibFacts(library=path, source="static in libtorch_cuda"))
    return out


def torchrun_facts(tree: Tree, inv: Inventory, torch: ImageTorchFacts, path_var: str) -> ImageTorchrunFacts:
    on_path = which(tree, "torchrun", path_var)
    prefix = torch.get("prefix")
    own = f"{prefix.rstrip('/')}/bin/torchrun" if prefix else None
    own_exists = bool(own and tree.lookup(own) and tree.lookup(own)[1].kind == FILE)  # type: ignore[index]
    path = on_path or (own if own_exists else None) or (inv.torchruns[0] if inv.torchruns else None)
    out = ImageTorchrunFacts(
        path=path,
        on_path=on_path,
        expected=own,
        shebang=None,
        shebang_python=None,
        shebang_exists=None,
        same_env=None,
        all=inv.torchruns,
    )
    if path is None:
        return out
    words = shebang(tree.read(path))
    out["shebang"] = " ".join(words) if words else None
    if not words:
        return out
    interp = words[0]
    if interp.rsplit("/", 1)[-1] == "env" and len(words) > 1:
        interp = which(tree, words[1], path_var) or words[1]
    out["shebang_python"] = interp
    hit = tree.lookup(interp) if interp.startswith("/") else None
    out["shebang_exists"] = bool(hit and hit[1].kind == FILE)
    if prefix and interp.startswith("/"):
        out["same_env"] = realdir(tree, interp) == (tree.lookup(f"{prefix.rstrip('/')}/bin") or ("",))[0]
    return out


def python_facts(tree: Tree, inv: Inventory, torch: ImageTorchFacts) -> ImagePythonFacts:
    executable = None
    broken = dangling_interpreters(tree, inv.interpreters)
    prefix, tag = torch.get("prefix"), torch.get("python_tag")
    if prefix and tag:
        for name in (tag, "python3", "python"):
            candidate = f"{prefix.rstrip('/')}/bin/{name}"
            found = tree.lookup(candidate)
            if found and found[1].kind == FILE:
                executable = candidate
                break
    version = torch.get("python_tag", "").replace("python", "") or None
    return ImagePythonFacts(
        interpreters=[p for p in inv.interpreters if p not in broken],
        broken_interpreters=broken,
        site_packages=inv.site_packages,
        executable=executable,
        version=version,
        prefix=torch.get("prefix"),
    )


def dangling_interpreters(tree: Tree, paths: list[str]) -> dict[str, str]:
    """Interpreters that are links to nothing inside the image -> their link text. Links are
    followed within the image root only (an absolute target names the image's file, never the
    host's), so a venv built against a Python the image lacks shows here."""
    broken = {}
    for path in paths:
        found = tree.lookup(path)
        if found is None or found[1].kind != FILE:
            broken[path] = _last_hop(tree, path)
    return broken


def _last_hop(tree: Tree, path: str) -> str:
    """Where a chain of links starting at `path` ends up: the first path in it the image lacks."""
    for _ in range(40):
        own = tree.lookup(path, follow=False)
        if own is None or own[1].kind != SYMLINK:
            return path
        link = own[1].link
        path = posixpath.normpath(link if link.startswith("/") else f"{own[0].rpartition('/')[0]}/{link}")
    return path


def os_release(tree: Tree) -> str | None:
    data = tree.read("/etc/os-release") or tree.read("/usr/lib/os-release")
    if not data:
        return None
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None
