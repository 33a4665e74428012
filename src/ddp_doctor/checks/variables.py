"""One verdict per environment variable, from knowledge/variables.yaml, for every place a variable is
set: the host's environment (`check`: env.env_vars and env.dist_vars), an image's config Env
(`image`: image.env) and a launch config (`lint`: container env, compose environment, Dockerfile ENV,
`export` in a script, `srun --export`, `mpirun -x`, SkyPilot envs).

A variable gets exactly one verdict, the most telling: an old name, a setting no library reads (a
belief), a name close to a real one, an empty or invalid value, one this NCCL does not read, then
what a valid value costs or changes. What differs between places is only the context: whether NCCL
runs there (a CUDA torch with a GPU, a GPU job) and what the host has (interfaces, NVLink, IB).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from typing import Any, TypedDict, cast

from ddp_doctor import knowledge
from ddp_doctor.checks import interfaces as interfaces_mod
from ddp_doctor.checks.facts.fields import required, typed, version_tuple
from ddp_doctor.checks.facts.host import VariableContext

PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "GLOO_")
"""The names env.dist_vars judges (those of NCCL, torch.distributed and gloo); *_SOCKET_IFNAME and
the rank / CUDA variables are env.env_vars'."""
_TRUE_FALSE = ("0", "1")
# torch's getCvarBool (c10d/Utils.hpp), compared after lower-casing.
_TORCH_BOOL = ("1", "0", "y", "n", "yes", "no", "t", "f", "true", "false")
_OP_PREFIX = re.compile(r"^[A-Za-z]+:")
_DEVICE = re.compile(r"^(\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F/-]+)$")
DORMANT = (
    "NCCL is not used on this host (no CUDA build of torch with a GPU), so this fails only once the job runs on GPUs"
)

TYPES = ("bool", "torch_bool", "int", "enum", "list", "devices", "string", "path", "ifname")
"""The kinds of value the table knows (`type` of an entry)."""


class VariableSpec(TypedDict, total=False):
    """One entry of variables.yaml `variables`: a variable, what its reader accepts, and where that is written."""

    name: str
    type: str
    """One of TYPES: how `invalid` judges a value."""
    reader: str
    """NCCL, torch or gloo when the name's prefix does not say."""
    values: list[str | int]
    """What an enum or list takes."""
    open: bool
    """An enum that also takes a plugin's name."""
    case: str
    min: int
    max: int
    multiple: int
    invalid: str
    """fail when the reader refuses a bad value (it raises), else warn."""
    empty: str
    """What an empty value means, where it differs from the reader's rule (`empty` of the table)."""
    since: str
    removed: str
    torch_since: str
    docs: str
    source: str
    note: str
    unverified: str


class Renamed(TypedDict, total=False):
    """An old name (variables.yaml `renamed`) and whether the reader still reads it."""

    new: str
    old_read: bool


class Belief(TypedDict, total=False):
    """A setting no library reads (variables.yaml `beliefs`), what people meant by it, and the knobs that do it."""

    name: str
    believed: str
    checked: str
    unit: str
    knobs: list[str]
    fills: dict[str, str]
    """The variables a knob's {value} is written into: the user's value must be valid for each."""
    sources: list[str]


class Setting(TypedDict, total=False):
    """What a valid value costs or changes (variables.yaml `settings`)."""

    name: str
    when: str
    """The value it applies to, or `set` for any."""
    only_if: str
    """nvlink or infiniband: only where the host has it."""
    status: str
    says: str
    remedy: str
    source: str


class VariablesTable(TypedDict, total=False):
    """knowledge/variables.yaml as written (each entry carries its source)."""

    variables: list[VariableSpec]
    renamed: dict[str, Renamed]
    beliefs: list[Belief]
    settings: list[Setting]
    known_names: list[str]
    """Real variables of these readers the table does not judge (no near-miss for them)."""
    ifname_vars: list[str]
    rank_vars: list[str]
    empty: dict[str, dict[str, str]]
    """reader -> type -> what an empty value means (unset or invalid), and its source."""
    sources: dict[str, str]


@dataclasses.dataclass(frozen=True)
class VariableVerdict:
    """What one variable set to one value means where it is read."""

    variable: str
    value: str
    status: str
    """fail | warn | pass"""
    kind: str
    """renamed | belief | unknown | empty | invalid | unread | plugin | setting | valid | rank | devices | interface"""
    text: str
    remedy: str | None
    source: str
    dormant: bool = False
    """Fails only where NCCL runs, which it does not here (said once per finding)."""
    group: str | None = None
    """A heading several verdicts share in a summary ('set outside torchrun')."""

    def to_dict(self) -> dict[str, object]:
        """The verdict as a Result's observed `verdicts[]` holds it, which from_dict reads back."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> VariableVerdict:
        """A verdict of a Result's observed `verdicts[]`; a field missing or of the wrong type raises."""
        text = {k: required(d.get(k), str, f"verdicts[].{k}") for k in ("variable", "value", "status", "kind", "text")}
        return cls(
            **text,
            remedy=typed(d.get("remedy"), str, "verdicts[].remedy"),
            source=required(d.get("source"), str, "verdicts[].source"),
            dormant=bool(typed(d.get("dormant"), bool, "verdicts[].dormant")),
            group=typed(d.get("group"), str, "verdicts[].group"),
        )

    @property
    def values_check(self) -> bool:
        """Judged by env.dist_vars (NCCL / torch.distributed / gloo values) rather than env.env_vars."""
        return self.variable.startswith(PREFIXES) and self.kind != "interface"


def table() -> VariablesTable:
    return cast(VariablesTable, knowledge.load_mapping("variables.yaml"))


def _specs() -> dict[str, VariableSpec]:
    return {str(v["name"]): v for v in table()["variables"]}


def spec(name: str) -> VariableSpec | None:
    return _specs().get(name)


def reader(name: str, entry: VariableSpec | None = None) -> str:
    if entry is not None and entry.get("reader"):
        return str(entry["reader"])
    if name.startswith("NCCL_"):
        return "NCCL"
    if name.startswith("GLOO_"):
        return "gloo"
    return "torch"


def accepted(entry: VariableSpec) -> str:
    kind = entry["type"]
    if kind == "bool":
        return "0 or 1"
    if kind == "torch_bool":
        return "1/0, true/false, yes/no, y/n or t/f (any case)"
    if kind == "int":
        lo, hi, step = entry.get("min"), entry.get("max"), entry.get("multiple")
        return f"an integer{f' >= {lo}' if lo is not None else ''}{f' and <= {hi}' if hi is not None else ''}" + (
            f", a multiple of {step}" if step else ""
        )
    if kind == "devices":
        return "a comma-separated list of GPU indices or GPU-/MIG- UUIDs"
    values = ", ".join(str(v) for v in entry.get("values") or [])
    if kind == "list":
        return f"a comma-separated list of {values} (a leading ^ excludes)"
    return f"one of {values}" + (" or a network plugin's name" if entry.get("open") else "")


def _norm(value: str, entry: VariableSpec) -> str:
    return value.lower() if entry.get("case") == "insensitive" else value


def invalid(value: str, entry: VariableSpec) -> str | None:
    """None when the reader accepts `value`, else the offending part."""
    kind, v = entry["type"], value.strip()
    allowed = {_norm(str(x), entry) for x in entry.get("values") or []}
    if kind == "bool":
        return None if v in _TRUE_FALSE else v
    if kind == "torch_bool":
        return None if v.lower() in _TORCH_BOOL else v
    if kind == "int":
        try:
            n = int(v, 0)
        except ValueError:
            return v
        lo, hi, step = entry.get("min"), entry.get("max"), entry.get("multiple")
        out_of_range = (lo is not None and n < lo) or (hi is not None and n > hi)
        return v if out_of_range or (step and n % int(step)) else None
    if kind == "enum":
        if entry.get("open"):
            return None if v else v  # a plugin name cannot be judged here; the live chain names it if init fails
        return None if _norm(v, entry) in allowed else v
    if kind == "list":
        # NCCL >= 2.24 also takes per-collective lists: "allreduce:tree,ring;broadcast:ring".
        for part in v.lstrip("^").split(";"):
            for item in _OP_PREFIX.sub("", part.strip()).lstrip("^").split(","):
                if item.strip() and _norm(item.strip(), entry) not in allowed:
                    return item.strip()
        return None
    if kind == "devices":
        return next((d for d in v.split(",") if not _DEVICE.match(d.strip())), None)
    return None


def _empty_means(name: str, entry: VariableSpec) -> str:
    if entry.get("empty"):
        return str(entry["empty"])
    by_reader = (table().get("empty") or {}).get(reader(name, entry)) or {}
    return str(by_reader.get(entry["type"], "unknown"))


def source_of(entry: VariableSpec) -> str:
    """The entry's own source (a file of a tagged source tree, or a URL), then its docs page."""
    sources = table().get("sources") or {}
    own = str(entry.get("source") or "")
    docs = str(sources.get(str(entry.get("docs")), "")) if entry.get("docs") else ""
    own = str(sources.get(own, own))
    return "; ".join(dict.fromkeys(x for x in (own, docs) if x))


# --- the verdicts -------------------------------------------------------------------------


def judge(env: Mapping[str, str], where: VariableContext) -> list[VariableVerdict]:
    """One verdict per variable the table has something to say about, in name order."""
    data = table()
    specs = _specs()
    out: list[VariableVerdict] = []
    for name, value in sorted(env.items()):
        verdict = _one(name, value, specs.get(name), where, data, env)
        if verdict is not None:
            out.append(verdict)
    out += _ranks(env, where, list(data.get("rank_vars") or []))
    return out


def _one(
    name: str,
    value: str,
    entry: VariableSpec | None,
    where: VariableContext,
    data: VariablesTable,
    env: Mapping[str, str],
) -> VariableVerdict | None:
    renamed = (data.get("renamed") or {}).get(name)
    if renamed is not None:
        return _old_name(name, value, renamed)
    belief = next((b for b in data.get("beliefs") or [] if b["name"] == name), None)
    if belief is not None:
        return _belief(name, value, belief)
    if name in (data.get("ifname_vars") or []):
        return _ifname(name, value, env, where)
    if entry is None:
        if not name.startswith(PREFIXES) or name in set(data.get("known_names") or []):
            return None  # not a variable of these readers, or a real one this table does not judge
        return _near_miss(name, value, data)
    if entry["type"] == "devices":
        return _devices(name, value, entry, where)
    if value.strip() == "":
        return _empty(name, entry, where)
    bad = invalid(value, entry)
    if bad is not None and entry["type"] not in ("string", "path", "ifname"):
        return _invalid(name, value, bad, entry, where)
    return _valid(name, value, entry, where, data)


def _status(entry: VariableSpec, name: str, where: VariableContext) -> tuple[str, bool]:
    """(status, dormant) of a value the reader refuses: a FAIL only where the reader runs."""
    refused = str(entry.get("invalid", "warn")) == "fail"
    if not refused:
        return "warn", False
    if reader(name, entry) == "NCCL" and where.nccl_runs is False:
        return "warn", True
    return "fail", False


def _invalid(name: str, value: str, bad: str, entry: VariableSpec, where: VariableContext) -> VariableVerdict:
    status, dormant = _status(entry, name, where)
    return VariableVerdict(
        name,
        value,
        status,
        "invalid",
        f"{name}={value}: {bad!r} is not accepted; {name} takes {accepted(entry)}",
        f"set {name} to {accepted(entry)}, or unset it to let {reader(name, entry)} choose",
        source_of(entry),
        dormant,
    )


def _empty(name: str, entry: VariableSpec, where: VariableContext) -> VariableVerdict:
    means = _empty_means(name, entry)
    who = reader(name, entry)
    how = str(((table().get("empty") or {}).get(who) or {}).get("source") or source_of(entry))
    if means == "unset":
        return VariableVerdict(
            name, "", "pass", "empty", f"{name} is empty: {who} reads it as unset (its default)", None, how
        )
    if means == "invalid":
        status, dormant = _status(entry, name, where)
        return VariableVerdict(
            name,
            "",
            status,
            "empty",
            f"{name} is empty, which {who} does not accept (it raises when it reads it); {name} takes {accepted(entry)}",
            f"unset {name} rather than leaving it empty, or set it to {accepted(entry)}",
            how,
            dormant,
        )
    return VariableVerdict(
        name,
        "",
        "warn",
        "empty",
        f"{name} is empty: whether {who} reads an empty {name} as unset was not checked ({name} takes {accepted(entry)})",
        f"unset {name} rather than leaving it empty",
        source_of(entry),
    )


def _valid(name: str, value: str, entry: VariableSpec, where: VariableContext, data: VariablesTable) -> VariableVerdict:
    source = source_of(entry)
    if entry.get("open"):
        plugin = _unseen_plugin(name, value, entry, where, source)
        if plugin is not None:
            return plugin
    unread = _unread(name, value, entry, where, source)
    if unread is not None:
        return unread
    for rule in data.get("settings") or []:
        if rule["name"] != name or not _applies(rule, value, where):
            continue
        sources = data.get("sources") or {}
        return VariableVerdict(
            name,
            value,
            str(rule["status"]),
            "setting",
            f"{name}={value}: {rule['says']}",
            str(rule["remedy"]) if rule.get("remedy") and rule["status"] != "pass" else None,
            str(sources.get(rule["source"], rule["source"])),
        )
    return VariableVerdict(name, value, "pass", "valid", "", None, source)


def _applies(rule: Setting, value: str, where: VariableContext) -> bool:
    when = str(rule["when"])
    if when != "set" and value.strip().lower() != when.lower():
        return False
    cond = rule.get("only_if")
    return cond is None or (cond == "nvlink" and where.nvlink) or (cond == "infiniband" and where.infiniband)


def _unread(name: str, value: str, entry: VariableSpec, where: VariableContext, source: str) -> VariableVerdict | None:
    since, removed = version_tuple(entry.get("since")), version_tuple(entry.get("removed"))
    nccl = where.nccl_version
    if nccl is None:
        return None
    here = ".".join(map(str, nccl))
    if since and nccl < since:
        text = f"{name} was added in NCCL {entry['since']}; this NCCL ({here}) ignores it"
        return VariableVerdict(
            name, value, "warn", "unread", text, f"upgrade NCCL to >= {entry['since']} or unset {name}", source
        )
    if removed and nccl >= removed:
        text = f"{name} was removed in NCCL {entry['removed']}; this NCCL ({here}) ignores it"
        return VariableVerdict(name, value, "warn", "unread", text, f"unset {name}", source)
    return None


def _unseen_plugin(
    name: str, value: str, entry: VariableSpec, where: VariableContext, source: str
) -> VariableVerdict | None:
    """NCCL_NET names neither a built-in network (compared case-insensitively, NCCL src/plugin/net.cc)
    nor anything a network plugin could provide, because no plugin library is where NCCL loads one.
    A WARN, never a FAIL: a plugin may sit where the loader finds it and we did not look (a RUNPATH)."""
    builtin = [str(v) for v in entry.get("values") or []]
    if value.strip().lower() in {b.lower() for b in builtin}:
        return None
    plugins = where.net_plugins
    if plugins is None or plugins.found:
        return None  # not probed (an older report, a config), or a plugin exists: its declared name is unknown here
    looked = (
        f"looked for {' and '.join(plugins.names)} in {', '.join(plugins.searched)}"
        if plugins.names
        else "NCCL_NET_PLUGIN=none turns external plugins off"
    )
    return VariableVerdict(
        name,
        value,
        "warn",
        "plugin",
        f"{name}={value}: NCCL accepts {' or '.join(builtin)} (any case) or the name a loaded network plugin "
        f"declares, and no network plugin library is where NCCL loads one ({looked}); "
        "NCCL init will fail with 'invalid usage' unless a plugin is found elsewhere",
        f"unset {name} (NCCL picks IB when present, else Socket), set it to {' or '.join(builtin)}, or install "
        "the plugin (libnccl-net-<name>.so on LD_LIBRARY_PATH, or NCCL_NET_PLUGIN=<path>)",
        source,
    )


def _old_name(name: str, value: str, entry: Renamed) -> VariableVerdict:
    new = str(entry["new"])
    target = spec(new)
    takes = f" and set it to {accepted(target)}" if target is not None and invalid(value, target) is not None else ""
    still = (
        "torch 2.13 still reads it, with a deprecation warning"
        if entry.get("old_read")
        else "torch 2.13 no longer reads it at all"
    )
    return VariableVerdict(
        name,
        value,
        "warn",
        "renamed",
        f"{name} is the old name of {new}; {still}",
        f"rename it to {new}{takes}" if takes else f"rename it: {new}={value}",
        "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp (torch 2.13)",
    )


def _belief(name: str, value: str, belief: Belief) -> VariableVerdict:
    """A setting no library reads: what people meant, and the knobs that do it, with the user's value
    filled in where it fits the knob."""
    fits = _fits(value, belief)
    knobs = [str(k).replace("{value}", value.strip() if fits else "<N>") for k in belief.get("knobs") or []]
    unit = f" ({belief['unit']})" if belief.get("unit") and not fits else ""
    return VariableVerdict(
        name,
        value,
        "warn",
        "belief",
        f"{name}={value}: no library reads {name} (it is set in the belief that it is {belief['believed']}); "
        f"{belief['checked']}",
        f"remove {name} and set it where it is read{unit}: " + "; ".join(knobs),
        "; ".join(str(s) for s in belief.get("sources") or []),
    )


def _fits(value: str, belief: Belief) -> bool:
    """The user's value can stand in every knob: a positive whole number, valid for every variable the
    knobs name (the table's own ranges)."""
    v = value.strip()
    if not v.isdigit() or int(v) < 1:
        return False
    for name in belief.get("fills") or {}:
        entry = spec(name)
        if entry is not None and invalid(v, entry) is not None:
            return False
    return True


def edits(a: str, b: str) -> int:
    """The edits (a letter added, dropped, changed, or two swapped) that turn a into b."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[-1]


def _ambiguous(name: str, value: str, nearest: list[str], data: VariablesTable) -> VariableVerdict:
    """A name as close to two real ones (NCCL_MAN_NCHANNELS: MIN or MAX?): which was meant the name cannot
    say, and the two mean different things, so neither is proposed."""
    a, b = nearest
    return VariableVerdict(
        name,
        value,
        "warn",
        "unknown",
        f"{name} is not a variable NCCL or torch reads; it is as close to {a} as to {b}, which mean different "
        "things, so it is not renamed to either",
        f"remove {name}, or rename it to the one you meant ({a} or {b}; the NCCL and torch variables: "
        f"{data['sources']['nccl-env']}, {data['sources']['torch-env']})",
        "known_names and variables in knowledge/variables.yaml",
    )


def _near_miss(name: str, value: str, data: VariablesTable) -> VariableVerdict | None:
    """A name no reader has, close to one that exists. A typo only when the value fits the near name;
    otherwise the near name means something else, and proposing it would set a value it refuses."""
    specs = _specs()
    close = difflib.get_close_matches(name, [*specs, *sorted(data.get("known_names") or [])], n=4, cutoff=0.85)
    if not close:
        return None
    ranked = sorted(close, key=lambda real: edits(name, real))
    if len(ranked) > 1 and edits(name, ranked[0]) == edits(name, ranked[1]):
        return _ambiguous(name, value, ranked[:2], data)
    close = ranked
    near = specs.get(close[0])
    if near is not None and value.strip() and invalid(value, near) is not None:
        return VariableVerdict(
            name,
            value,
            "warn",
            "unknown",
            f"{name}={value}: no library reads {name}. The closest real name, {close[0]}, takes {accepted(near)}, "
            f"which {value!r} is not: {name} is not a misspelling of it but a setting that does nothing",
            f"remove {name}; look up what you meant to change (the NCCL and torch variables: "
            f"{data['sources']['nccl-env']}, {data['sources']['torch-env']})",
            source_of(near),
        )
    return VariableVerdict(
        name,
        value,
        "warn",
        "unknown",
        f"{name} is not a variable NCCL or torch reads; did you mean {close[0]}?",
        f"rename it: {close[0]}={value}" + (f"  ({accepted(near)})" if near else ""),
        source_of(near) if near else "known_names in knowledge/variables.yaml",
    )


def _ifname(name: str, value: str, env: Mapping[str, str], where: VariableContext) -> VariableVerdict | None:
    """A *_SOCKET_IFNAME that selects no interface here (NCCL), or names one that does not exist
    (gloo opens every listed name): the process group cannot open its socket. Not judged where the
    interfaces are not known (an image, a config: they are the node's)."""
    network = where.network
    if network is None:
        return None
    lacking = interfaces_mod.missing(name, value, network.names)
    if not lacking:
        return None
    have = ", ".join(network.names)
    text = (
        f"{name}={value} matches no interface (have: {have})"
        if not interfaces_mod.selected(name, value, network.names)
        else f"{name}={value} names {', '.join(lacking)}, which does not exist here; "
        f"gloo opens every listed interface (have: {have})"
    )
    entry = spec(name) or {}
    remedy = interfaces_mod.ifname_remedy(name, env, network)
    return VariableVerdict(name, value, "fail", "interface", text, remedy, source_of(entry) if entry else "")


def _devices(name: str, value: str, entry: VariableSpec, where: VariableContext) -> VariableVerdict | None:
    """CUDA_VISIBLE_DEVICES read for its form. Where GPUs are seen the GPU checks judge it against
    them (env.gpus, env.gpus.expected); here only a value that hides every GPU on any host is said."""
    if where.gpus_seen:
        return None
    v = value.strip()
    first = v.split(",")[0].strip()
    hidden = v in ("", "-1")
    if not hidden and _DEVICE.match(first):
        return None
    why = (
        "an empty value"
        if v == ""
        else (f"{v}" if hidden else f"{first!r} is not an index or a GPU-/MIG- UUID, and CUDA stops at it")
    )
    # Hiding the GPUs on purpose is how a CPU job is told so; a value that is no device list is a mistake anywhere.
    if where.nccl_runs is True:
        status = "fail"
    elif where.nccl_runs is False:
        status = "pass" if hidden else "warn"
    else:
        status = "warn"
    return VariableVerdict(
        name,
        value,
        status,
        "devices",
        f"{name}={value!r} hides every GPU ({why}): CUDA sees none on any host",
        f"unset {name}, or list the GPUs to use ({accepted(entry)}; `nvidia-smi -L`)" if status != "pass" else None,
        source_of(entry),
        dormant=status == "warn" and where.nccl_runs is False,
    )


def _ranks(env: Mapping[str, str], where: VariableContext, rank_vars: list[str]) -> list[VariableVerdict]:
    """RANK / WORLD_SIZE / LOCAL_RANK / MASTER_*: torchrun sets its own for every rank, so values set by
    hand matter to a plain `python train.py` (init_method env://), which reads them. One verdict each:
    a value that plain launch refuses, else set outside torchrun."""
    if "TORCHELASTIC_RUN_ID" in env or where.rank_setter is True:
        return []  # inside torchrun (or under a launcher that sets them): these are the launcher's own
    given = {k: env[k] for k in rank_vars if k in env}
    ints: dict[str, int] = {}
    out: list[VariableVerdict] = []
    plain = "a plain `python train.py` (init_method env://) raises on it; torchrun replaces it"
    status = "fail" if where.rank_setter is False else "warn"
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
        if k not in given:
            continue
        try:
            ints[k] = int(given[k])
        except ValueError:
            remedy = f"set {k} to an integer, or unset it and let torchrun set it"
            out.append(
                VariableVerdict(
                    k, given[k], status, "rank", f"{k}={given[k]!r} is not an integer: {plain}", remedy, "torchrun"
                )
            )
    bad = {v.variable for v in out}
    if "RANK" in ints and "WORLD_SIZE" in ints and not 0 <= ints["RANK"] < ints["WORLD_SIZE"]:
        text = f"RANK={ints['RANK']} is outside 0..WORLD_SIZE-1 (WORLD_SIZE={ints['WORLD_SIZE']}): {plain}"
        out.append(
            VariableVerdict(
                "RANK", given["RANK"], status, "rank", text, "fix RANK/WORLD_SIZE, or unset both", "torchrun"
            )
        )
        bad.add("RANK")
    if "MASTER_PORT" in ints and not 1 <= ints["MASTER_PORT"] <= 65535:
        text = f"MASTER_PORT={ints['MASTER_PORT']} is not a TCP port"
        out.append(
            VariableVerdict(
                "MASTER_PORT", given["MASTER_PORT"], status, "rank", text, "use a port in 1..65535", "torchrun"
            )
        )
        bad.add("MASTER_PORT")
    half = ("RANK" in given) != ("WORLD_SIZE" in given) or ("MASTER_ADDR" in given) != ("MASTER_PORT" in given)
    listed = ", ".join(f"{k}={v}" for k, v in given.items())
    group = (
        f"only part of RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT is set ({listed})" if half else "set outside torchrun"
    )
    remedy = (
        "set all four for a manual env:// launch, or none and use torchrun"
        if half
        else "torchrun overrides them, but a plain `python train.py` would use them; unset them in the shell/image"
    )
    for k, v in given.items():
        if k not in bad:
            out.append(VariableVerdict(k, v, "warn", "rank", f"{k}={v}", remedy, "torchrun", group=group))
    return out


# --- summaries -----------------------------------------------------------------------------

_ORDER = {"fail": 0, "warn": 1, "pass": 2}


def summary(verdicts: list[VariableVerdict]) -> str:
    """The verdicts' texts, worst first, those of one group under its heading."""
    parts: list[str] = []
    groups: dict[str, list[str]] = {}
    for v in sorted((v for v in verdicts if v.text), key=lambda v: _ORDER.get(v.status, 3)):
        if v.group is None:
            parts.append(v.text)
        elif v.group not in groups:
            groups[v.group] = [v.text]
            parts.append(v.group)
        else:
            groups[v.group].append(v.text)
    return "; ".join(f"{p}: {', '.join(groups[p])}" if p in groups else p for p in parts)


def remedies(verdicts: list[VariableVerdict]) -> list[str]:
    ordered = sorted(verdicts, key=lambda v: _ORDER.get(v.status, 3))
    return list(dict.fromkeys(v.remedy for v in ordered if v.remedy and v.status != "pass"))


# --- the live chain's root cause ------------------------------------------------------------

_NO_INTERFACE = ("no socket interface found", "no usable", "IFNAME")
# NCCL 2.28's words when NCCL_NET names no loaded network (recorded on the H200:
# tests/fixtures/gpu/trust/net-bogus.json); the value itself is not in the message.
_NO_NET = "Failed to initialize any NET plugin"


def root_cause_variable(env: dict[str, str], text: str, interfaces: list[str]) -> str | None:
    """The variable a live failure points at: NCCL_NET / NCCL_ALGO / NCCL_PROTO set to a value this
    table rejects (or, for NCCL_NET, a plugin name the error text mentions), or an *_SOCKET_IFNAME
    that matches no interface while the error says no interface was usable."""
    specs = _specs()
    for name in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_SOCKET_FAMILY"):
        if name in env and invalid(env[name], specs[name]) is not None:
            return name
    net = env.get("NCCL_NET", "").strip()
    if net and net.lower() not in ("ib", "socket") and (re.search(rf"\b{re.escape(net)}\b", text) or _NO_NET in text):
        return "NCCL_NET"
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        value = env.get(name, "").strip()
        if not value or value.startswith("^"):
            continue
        if interfaces_mod.missing(name, value, interfaces) and (any(k in text for k in _NO_INTERFACE) or value in text):
            return name
    return None
