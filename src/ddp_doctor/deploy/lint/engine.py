"""Lint one file: tell what kind of config it is, parse it into Units, run the rules -> Results."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ddp_doctor.checks import table
from ddp_doctor.deploy.lint import compose, dockerfile, k8s, scripts, skypilot
from ddp_doctor.deploy.lint.loader import YMap, load_yaml_documents, read_text
from ddp_doctor.deploy.lint.model import Ctx, Unit
from ddp_doctor.deploy.lint.rules import Hit, Text, catalogue, evaluate
from ddp_doctor.deploy.lint.rules import severity as severity_of
from ddp_doctor.errors import InputError
from ddp_doctor.report import Evidence, Result, Status
from ddp_doctor.words import count

KINDS = ("k8s", "compose", "skypilot", "dockerfile", "shell", "slurm")
FORMATS = (
    "a Kubernetes manifest (apiVersion + kind), a compose file (services), a SkyPilot task (run, setup, "
    "resources, num_nodes), a Dockerfile, a shell or Slurm script"
)
STATUS = {"error": Status.FAIL, "warning": Status.WARN, "info": Status.INFO}
_COMPOSE_NAME = re.compile(r"^(docker-)?compose(\.[\w-]+)?\.ya?ml$|\.compose\.ya?ml$", re.IGNORECASE)
_DOCKERFILE_NAME = re.compile(r"^(Dockerfile|Containerfile)(\..+)?$|\.(Dockerfile|Containerfile)$", re.IGNORECASE)


@dataclass
class FileResult:
    path: str
    kind: str
    units: list[Unit]
    results: list[Result]
    notes: list[str]


_SRUN_LINE = re.compile(r"^[ \t]*(?:exec[ \t]+|time[ \t]+|nohup[ \t]+)?srun[ \t]", re.MULTILINE)
"""A script that starts srun steps is a Slurm job, with #SBATCH lines or without (an srun wrapper run in
an allocation, or srun allocating one itself from its own options)."""


def detect(path: Path, text: str) -> str:
    name = path.name
    if _DOCKERFILE_NAME.search(name):
        return "dockerfile"
    if name.lower().endswith((".yaml", ".yml", ".json")):
        return "compose" if _COMPOSE_NAME.search(name) else "yaml"
    if re.search(r"^#SBATCH\b", text, re.MULTILINE) or _SRUN_LINE.search(text):
        return "slurm"
    if name.lower().endswith((".sh", ".bash", ".sbatch", ".slurm")) or text.startswith("#!"):
        return "shell"
    first = next((l.strip() for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")), "")
    if re.match(r"^(FROM|ARG)\s", first, re.IGNORECASE) and re.search(r"^FROM\s", text, re.MULTILINE | re.IGNORECASE):
        return "dockerfile"
    if re.match(r"^(apiVersion|kind|services|version|---)\b", first) or re.match(
        r"^(name|resources|num_nodes|run|setup|envs|file_mounts|workdir):", first
    ):
        return "yaml"
    if re.search(r"\b(torchrun|docker\s+run|podman\s+run|torch\.distributed\.run)\b", text):
        return "shell"
    raise InputError(
        f"{path}: not a format lint reads; expected {FORMATS} (name it *.yaml, Dockerfile, *.sh or *.sbatch to say which)"
    )


def _objects(docs: list[Any]) -> list[Any]:
    """The documents, with every List (kind: List, PodList, ...) replaced by its items."""
    out: list[Any] = []
    for doc in docs:
        items = doc.get("items") if isinstance(doc, YMap) else None
        if isinstance(items, list) and str(doc.get("kind", "")).endswith("List"):
            out += _objects([i for i in items if isinstance(i, YMap)])
        else:
            out.append(doc)
    return out


def _embedded(docs: list[Any], path: str, notes: list[str], depth: int = 0) -> list[Any]:
    """Objects an Argo resource template creates (`resource.manifest`, a YAML string), with their lines in
    the file: they run as any object of the file does."""
    out: list[Any] = []
    for doc in docs:
        spec = (
            doc.get("spec")
            if isinstance(doc, YMap) and str(doc.get("apiVersion", "")).startswith("argoproj.io/")
            else None
        )
        spec = spec.get("workflowSpec", spec) if isinstance(spec, YMap) else None
        templates = spec.get("templates") if isinstance(spec, YMap) else None
        for t in templates if isinstance(templates, list) else []:
            resource = t.get("resource") if isinstance(t, YMap) else None
            if not isinstance(resource, YMap) or not isinstance(resource.get("manifest"), str) or depth > 1:
                continue
            manifest: str = resource["manifest"]
            first = resource.value_line("manifest")
            try:
                inner = load_yaml_documents("\n" * (first - 1) + manifest, path)
            except InputError as exc:
                notes.append(f"{exc} (an Argo resource template's manifest); not checked")
                continue
            objects = _objects([d for d in inner if d is not None])
            out += objects + _embedded(objects, path, notes, depth + 1)
    return out


def _yaml_units(docs: list[Any], path: str, forced_compose: bool) -> tuple[str, list[Unit], list[str]]:
    units: list[Unit] = []
    notes: list[str] = []
    kinds_seen: set[str] = set()
    for doc in _objects(docs) + _embedded(_objects(docs), path, notes):
        if doc is None:
            continue
        if not isinstance(doc, YMap):
            notes.append(f"{path}:{getattr(doc, 'line', 1)}: a YAML document that is not a mapping; skipped")
            continue
        if forced_compose or ("services" in doc and "kind" not in doc):
            kinds_seen.add("compose")
            units += compose.units(doc, path)
            continue
        if skypilot.is_task(doc):
            kinds_seen.add("skypilot")
            units += skypilot.units(doc, path, notes)
            continue
        if set(doc) == {"name"} and len(docs) > 1:
            continue  # a SkyPilot pipeline's header: the tasks follow
        kind = doc.get("kind")
        if not isinstance(kind, str) or "apiVersion" not in doc:
            notes.append(
                f"{path}:{doc.line}: no apiVersion/kind (not a Kubernetes object) and no services "
                "(not a compose file); skipped"
            )
            continue
        kinds_seen.add("k8s")
        found = k8s.units(doc, path)
        if not found and kind == "TrainJob":
            notes.append(
                f"{path}:{doc.line}: TrainJob without spec.trainer: its runtime decides command, nodes and GPUs; "
                "lint the ClusterTrainingRuntime it names"
            )
        elif not found and kind not in k8s.PASSIVE:
            notes.append(f"{path}:{doc.line}: kind {kind} has no pod template ddp-doctor knows; not checked")
        units += found
    services = k8s.headless_services(list(_objects(docs)))
    for u in units:
        u.services = [n for n, sel in services.items() if u.pod_labels and sel.items() <= u.pod_labels.items()]
    if not kinds_seen:
        raise InputError(f"{path}: not a format lint reads" + ("" if notes else " (empty)") + f"; expected {FORMATS}")
    kind = next(k for k in KINDS if k in kinds_seen) if len(kinds_seen) == 1 else "k8s"
    return kind, units, notes


def lint_file(path_text: str, ignore: frozenset[str] = frozenset()) -> FileResult:
    path = Path(path_text)
    text = read_text(path)
    kind = detect(path, text)
    notes: list[str] = []
    if kind in ("yaml", "compose"):
        docs = load_yaml_documents(text, path_text)
        kind, units, notes = _yaml_units(docs, path_text, forced_compose=(kind == "compose"))
    elif kind == "dockerfile":
        units = dockerfile.units(text, path_text)
        if not units:
            raise InputError(f"{path}: no FROM instruction; not a Dockerfile")
    else:
        units = scripts.units(text, path_text, slurm=(kind == "slurm"), notes=notes)
    lines = text.split("\n")
    waived = suppressions(lines)
    hits = [(u, hit) for u in units for hit in evaluate(u) if not _suppressed(u, hit, waived, ignore)]
    results = merge([to_result(u, hit, lines) for u, hit in hits])
    results.sort(key=lambda r: (r.evidence[0].line or 0, r.id))
    return FileResult(path_text, kind, units, results, notes)


_SUPPRESS = re.compile(r"#\s*ddp-doctor:\s*ignore(?:\[([^\]]*)\])?")


def suppressions(lines: list[str]) -> dict[int, set[str] | None]:
    """line -> rule names waived there (None: every rule), from `# ddp-doctor: ignore[rule, ...]`.
    A comment on a line of its own waives the next line too, as a comment above a YAML key reads."""
    out: dict[int, set[str] | None] = {}
    for n, line in enumerate(lines, start=1):
        m = _SUPPRESS.search(line)
        if m is None:
            continue
        names = None if m.group(1) is None else {x.strip() for x in m.group(1).split(",") if x.strip()}
        targets = [n, n + 1] if line.lstrip().startswith("#") else [n]
        for target in targets:
            have = out.get(target, set())
            out[target] = None if names is None or have is None else have | names
    return out


def _matches(names: set[str] | frozenset[str] | None, u: Unit, hit: Hit) -> bool:
    return names is None or hit.name in names or f"lint.{u.area}.{hit.name}" in names


def _suppressed(u: Unit, hit: Hit, waived: dict[int, set[str] | None], ignore: frozenset[str]) -> bool:
    if _matches(ignore, u, hit):
        return True
    return hit.line in waived and _matches(waived[hit.line], u, hit)


def merge(results: list[Result]) -> list[Result]:
    """One finding per mistake: the same rule with the same message apart from where it is (a Master
    and a Worker with the same image) becomes one Result whose evidence lists every place."""
    groups: dict[tuple[str, str, str], Result] = {}
    out: list[Result] = []
    for r in results:
        where = str(r.observed.get("unit", ""))
        text = re.sub(r"line \d+", "line N", r.summary.split(": ", 1)[-1].replace(where, "<where>"))
        key = (r.id, text, r.remedy or "")
        first = groups.get(key)
        if first is None:
            groups[key] = r
            out.append(r)
            continue
        first.evidence.extend(e for e in r.evidence if e not in first.evidence)
        places = first.observed.setdefault("also", [])
        places.append(f"{where} (line {r.observed.get('line')})")
    for r in out:
        if r.observed.get("also"):
            r.summary += f" (also: {', '.join(r.observed['also'])})"
    return out


# {name} is the value; {name:word} the value counted in words ('{nproc:rank}' -> '1 rank', '8 ranks').
_FIELD = re.compile(r"\{([a-z_]+)(?::([A-Za-z][A-Za-z -]*))?\}")


def _text(value: Text, area: str, ctx: Ctx) -> str:
    if not isinstance(value, str):
        # Written for the launcher in the file first (torchrun / accelerate / tune), then for the kind of file.
        tool = str(ctx.get("tool"))
        # A Slurm or k8s text keyed by area wins over a generic torchrun text only when the launcher has none of its own.
        value = (
            value[tool]
            if tool in value and tool != "torchrun"
            else value.get(area, value.get(tool, next(iter(value.values()))))
        )
    # Only {known_name} is a placeholder: the fixes quote YAML such as {medium: Memory}.
    return _FIELD.sub(lambda m: _fill(m, ctx), value)


def _fill(m: re.Match[str], ctx: Ctx) -> str:
    name, word = m.group(1), m.group(2)
    if name not in ctx:
        return m.group(0)
    return count(ctx[name], word) if word else str(ctx[name])


def to_result(u: Unit, hit: Hit, lines: list[str]) -> Result:
    rule = catalogue()[hit.name]
    # Shared words first (checks/knowledge.yaml: /dev/shm sizes, why not root), so lint says what check and image say.
    ctx = {"where": u.name, **table.words(), **hit.context}
    severity = severity_of(hit)
    source_line = lines[hit.line - 1].strip() if 0 < hit.line <= len(lines) else ""
    return Result(
        id=f"lint.{u.area}.{hit.name}",
        title=rule.title,
        status=STATUS[severity],
        summary=f"{u.file}:{hit.line}: {_text(rule.message, u.area, ctx)}",
        cause=_text(rule.why, u.area, ctx),
        remedy=_text(rule.fix, u.area, ctx),
        observed={
            "severity": severity,
            "file": u.file,
            "line": hit.line,
            "unit": u.name,
            **{k: v for k, v in hit.context.items() if isinstance(v, (str, int, float, bool))},
        },
        expected={"source": rule.source},
        evidence=[Evidence(source=u.file, line=hit.line, text=source_line[:200])],
    )
