"""NCCL_* / TORCH_NCCL_* / TORCH_DISTRIBUTED_DEBUG / GLOO_* settings judged against the table in
knowledge/dist_vars.yaml: invalid values (naming the accepted ones), names that are close to a
real one ("did you mean"), variables this NCCL does not read (added later / removed), and valid
values with a cost on this machine."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from ddp_doctor import knowledge
from ddp_doctor.checks import interfaces as interfaces_mod

PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "GLOO_")
_TRUE_FALSE = ("0", "1")
# torch's getCvarBool (c10d/Utils.hpp), compared after lower-casing.
_TORCH_BOOL = ("1", "0", "y", "n", "yes", "no", "t", "f", "true", "false")
_OP_PREFIX = re.compile(r"^[A-Za-z]+:")


@dataclass(frozen=True)
class VariableProblem:
    """One distributed-training variable set wrong (a check's own conclusion is checks.model.Finding)."""

    status: str
    """fail | warn"""
    variable: str
    text: str
    remedy: str
    source: str


def table() -> dict[str, Any]:
    return knowledge.load_mapping("dist_vars.yaml")


def _spec_index() -> dict[str, dict[str, Any]]:
    return {str(v["name"]): v for v in table()["variables"]}


def accepted(spec: dict[str, Any]) -> str:
    kind = spec["type"]
    if kind == "bool":
        return "0 or 1"
    if kind == "torch_bool":
        return "1/0, true/false, yes/no, y/n or t/f (any case)"
    if kind == "int":
        lo, hi, step = spec.get("min"), spec.get("max"), spec.get("multiple")
        return f"an integer{f' >= {lo}' if lo is not None else ''}{f' and <= {hi}' if hi is not None else ''}" + (
            f", a multiple of {step}" if step else ""
        )
    values = ", ".join(str(v) for v in spec.get("values") or [])
    if kind == "list":
        return f"a comma-separated list of {values} (a leading ^ excludes)"
    return f"one of {values}" + (" or a network plugin's name" if spec.get("open") else "")


def _norm(value: str, spec: dict[str, Any]) -> str:
    return value.lower() if spec.get("case") == "insensitive" else value


def invalid(value: str, spec: dict[str, Any]) -> str | None:
    """None when NCCL/torch accepts `value`, else the offending part."""
    kind, v = spec["type"], value.strip()
    allowed = {_norm(str(x), spec) for x in spec.get("values") or []}
    if kind == "bool":
        return None if v in _TRUE_FALSE else v
    if kind == "torch_bool":
        return None if v.lower() in _TORCH_BOOL else v
    if kind == "int":
        try:
            n = int(v, 0)
        except ValueError:
            return v
        lo, hi, step = spec.get("min"), spec.get("max"), spec.get("multiple")
        out_of_range = (lo is not None and n < lo) or (hi is not None and n > hi)
        return v if out_of_range or (step and n % int(step)) else None
    if kind == "enum":
        if spec.get("open"):
            return None if v else v  # a plugin name cannot be judged here; the live chain names it if init fails
        return None if _norm(v, spec) in allowed else v
    if kind == "list":
        # NCCL >= 2.24 also takes per-collective lists: "allreduce:tree,ring;broadcast:ring".
        for part in v.lstrip("^").split(";"):
            for item in _OP_PREFIX.sub("", part.strip()).lstrip("^").split(","):
                if item.strip() and _norm(item.strip(), spec) not in allowed:
                    return item.strip()
        return None
    return None


def _version(text: Any) -> tuple[int, ...] | None:
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", str(text or ""))
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def _harmful_applies(rule: dict[str, Any], facts: dict[str, Any]) -> bool:
    cond = rule.get("only_if", "always")
    if cond == "nvlink":
        gpus = (facts.get("gpus") or {}).get("all") or []
        return any(int(g.get("nvlinks_active") or 0) > 0 for g in gpus)
    if cond == "infiniband":
        return bool(((facts.get("network") or {}).get("infiniband") or {}).get("devices"))
    return True


def _covered_elsewhere(name: str, value: str) -> bool:
    """env.env_vars (env_vars.yaml) already warns about this exact setting: do not say it twice."""
    return any(
        r["name"] == name and r.get("status") == "warn" and r["when"] in ("set", value)
        for r in knowledge.env_rules().get("rules", [])
    )


def _source(spec: dict[str, Any], sources: dict[str, Any]) -> str:
    """The entry's own source (a file of a tagged source tree, or a URL), then its docs page."""
    own = str(spec.get("source") or "")
    docs = str(sources.get(str(spec.get("docs")), "")) if spec.get("docs") else ""
    own = str(sources.get(own, own))
    return "; ".join(dict.fromkeys(x for x in (own, docs) if x))


def validate(env: dict[str, str], facts: dict[str, Any]) -> list[VariableProblem]:
    specs = _spec_index()
    data = table()
    renamed: dict[str, dict[str, Any]] = dict(data.get("renamed") or {})
    known = set(data.get("known_names") or [])
    src = data.get("sources") or {}
    nccl = _version((facts.get("nccl") or {}).get("version") or (facts.get("torch") or {}).get("nccl_version"))
    out: list[VariableProblem] = []
    for name, value in sorted(env.items()):
        spec = specs.get(name)
        if name in renamed:
            out.extend(f for f in [_old_name(name, value, renamed[name])] if f)
        elif not name.startswith(PREFIXES) or (spec is None and name in known):
            continue  # not ours, or a real variable this table does not judge
        elif spec is None:
            out.extend(f for f in [_near_miss(name, value, specs, known, src)] if f)
        else:
            out.extend(_judge(name, value, spec, facts, nccl, _source(spec, src)))
    for rule in data.get("harmful") or []:
        name = str(rule["name"])
        setting = env.get(name)
        if setting is None or setting.strip().lower() != str(rule["when"]).lower():
            continue
        if _covered_elsewhere(name, setting) or not _harmful_applies(rule, facts):
            continue
        out.append(
            VariableProblem(
                "warn",
                name,
                f"{name}={setting}: {rule['cost']}",
                f"unset {name} unless you need it",
                str(src.get(rule["source"], "")),
            )
        )
    return out


def _near_miss(
    name: str, value: str, specs: dict[str, dict[str, Any]], known: set[str], src: dict[str, Any]
) -> VariableProblem | None:
    # Against every real name, judged or not: NCCL_TUNER_PLUGINS means NCCL_TUNER_PLUGIN.
    close = difflib.get_close_matches(name, [*specs, *sorted(known)], n=1, cutoff=0.85)
    if not close:
        return None
    near = specs.get(close[0])
    return VariableProblem(
        "warn",
        name,
        f"{name} is not a variable NCCL or torch reads; did you mean {close[0]}?",
        f"rename it: {close[0]}={value}" + (f"  ({accepted(near)})" if near else ""),
        _source(near, src) if near else "known_names in knowledge/dist_vars.yaml",
    )


def _judge(
    name: str, value: str, spec: dict[str, Any], facts: dict[str, Any], nccl: tuple[int, ...] | None, source: str
) -> list[VariableProblem]:
    """One variable of the table: its value, then whether this NCCL reads it at all."""
    bad = invalid(value, spec)
    if bad is not None and spec["type"] not in ("string", "path", "ifname"):
        return [
            VariableProblem(
                str(spec.get("invalid", "warn")),
                name,
                f"{name}={value}: {bad!r} is not accepted; {name} takes {accepted(spec)}",
                f"set {name} to {accepted(spec)}, or unset it to let NCCL choose",
                source,
            )
        ]
    out = [f for f in [_unseen_plugin(name, value, spec, facts, source)] if f] if spec.get("open") else []
    since, removed = _version(spec.get("since")), _version(spec.get("removed"))
    here = ".".join(map(str, nccl or ()))
    if nccl and since and nccl < since:
        out.append(
            VariableProblem(
                "warn",
                name,
                f"{name} was added in NCCL {spec['since']}; this NCCL ({here}) ignores it",
                f"upgrade NCCL to >= {spec['since']} or unset {name}",
                source,
            )
        )
    if nccl and removed and nccl >= removed:
        out.append(
            VariableProblem(
                "warn",
                name,
                f"{name} was removed in NCCL {spec['removed']}; this NCCL ({here}) ignores it",
                f"unset {name}",
                source,
            )
        )
    return out


def _old_name(name: str, value: str, entry: dict[str, Any]) -> VariableProblem | None:
    if _covered_elsewhere(name, value):  # env.env_vars already says it
        return None
    new = str(entry["new"])
    still = (
        "torch 2.13 still reads it, with a deprecation warning"
        if entry.get("old_read")
        else "torch 2.13 no longer reads it at all"
    )
    return VariableProblem(
        "warn",
        name,
        f"{name} is the old name of {new}; {still}",
        f"rename it: {new}={value}",
        "pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp (torch 2.13)",
    )


def _unseen_plugin(
    name: str, value: str, spec: dict[str, Any], facts: dict[str, Any], source: str
) -> VariableProblem | None:
    """NCCL_NET names neither a built-in network (compared case-insensitively, NCCL src/plugin/net.cc)
    nor anything a network plugin could provide, because no plugin library is where NCCL loads one.
    A WARN, never a FAIL: a plugin may sit where the loader finds it and we did not look (a RUNPATH)."""
    builtin = [str(v) for v in spec.get("values") or []]
    if value.strip().lower() in {b.lower() for b in builtin}:
        return None
    plugins = (facts.get("nccl") or {}).get("net_plugins")
    if not isinstance(plugins, dict) or plugins.get("found"):
        return None  # not probed (an older report), or a plugin exists: its declared name is unknown here
    names = plugins.get("names") or []
    looked = (
        f"looked for {' and '.join(names)} in {', '.join(plugins.get('searched') or [])}"
        if names
        else "NCCL_NET_PLUGIN=none turns external plugins off"
    )
    return VariableProblem(
        "warn",
        name,
        f"{name}={value}: NCCL accepts {' or '.join(builtin)} (any case) or the name a loaded network plugin "
        f"declares, and no network plugin library is where NCCL loads one ({looked}); "
        "NCCL init will fail with 'invalid usage' unless a plugin is found elsewhere",
        f"unset {name} (NCCL picks IB when present, else Socket), set it to {' or '.join(builtin)}, or install "
        "the plugin (libnccl-net-<name>.so on LD_LIBRARY_PATH, or NCCL_NET_PLUGIN=<path>)",
        source,
    )


_NO_INTERFACE = ("no socket interface found", "no usable", "IFNAME")
# NCCL 2.28's words when NCCL_NET names no loaded network (recorded on the H200:
# tests/fixtures/gpu/trust/net-bogus.json); the value itself is not in the message.
_NO_NET = "Failed to initialize any NET plugin"


def root_cause_variable(env: dict[str, str], text: str, interfaces: list[str]) -> str | None:
    """The variable a live failure points at: NCCL_NET / NCCL_ALGO / NCCL_PROTO set to a value this
    table rejects (or, for NCCL_NET, a plugin name the error text mentions), or an *_SOCKET_IFNAME
    that matches no interface while the error says no interface was usable."""
    specs = _spec_index()
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
