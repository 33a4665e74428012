"""Do RANK / WORLD_SIZE / MASTER_* / NCCL_* / *_SOCKET_IFNAME in the environment make sense here?"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ddp_doctor import knowledge
from ddp_doctor.checks.hostfacts import EnvVarsFacts, NetworkFacts
from ddp_doctor.checks.interfaces import ifname_remedy, missing, selected
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status


@dataclass(frozen=True)
class VariableHit:
    """What one rule says about one set variable (lint's deploy.lint.rules.Hit is a rule firing at a line)."""

    status: Status
    text: str
    remedy: str | None


def _ifnames(env: Mapping[str, str], network: NetworkFacts | None, ifname_vars: list[str]) -> list[VariableHit]:
    """A *_SOCKET_IFNAME that selects no interface here (NCCL), or names one that does not exist
    (gloo opens every listed name): the process group cannot open its socket. Not judged where the
    interfaces are not known (an image: they are the node's)."""
    if network is None:
        return []
    names, hits = network.names, []
    for var in ifname_vars:
        lacking = missing(var, env[var], names) if var in env else []
        if not lacking:
            continue
        have = ", ".join(names)
        none_selected = not selected(var, env[var], names)
        text = (
            f"{var}={env[var]} matches no interface (have: {have})"
            if none_selected
            else f"{var}={env[var]} names {', '.join(lacking)}, which does not exist here; "
            f"gloo opens every listed interface (have: {have})"
        )
        hits.append(VariableHit(Status.FAIL, text, ifname_remedy(var, env, network)))
    return hits


def _table(env: Mapping[str, str], rules: list[dict[str, object]]) -> list[VariableHit]:
    """knowledge/env_vars.yaml: a variable set (or set to a value) that changes torchrun / NCCL behaviour."""
    hits = []
    for rule in rules:
        value = env.get(str(rule["name"]))
        if value is None or (rule["when"] != "set" and value != rule["when"]):
            continue
        remedy = rule.get("remedy")
        hits.append(
            VariableHit(
                Status(rule["status"]), f"{rule['name']}={value}: {rule['says']}", str(remedy) if remedy else None
            )
        )
    return hits


def _integers(rank_set: Mapping[str, str]) -> tuple[dict[str, int], list[VariableHit]]:
    ints, hits = {}, []
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):
        if k in rank_set:
            try:
                ints[k] = int(rank_set[k])
            except ValueError:
                hits.append(
                    VariableHit(
                        Status.FAIL, f"{k}={rank_set[k]!r} is not an integer", f"set {k} to an integer or unset it"
                    )
                )
    return ints, hits


def _ranks(env: Mapping[str, str], rank_vars: list[str], earlier: list[VariableHit]) -> list[VariableHit]:
    """RANK / WORLD_SIZE / MASTER_* set by hand: malformed, out of range, half set, or set outside
    torchrun (said only when nothing, here or `earlier`, already fails)."""
    rank_set = {k: env[k] for k in rank_vars if k in env}
    if not rank_set:
        return []
    ints, hits = _integers(rank_set)
    listed = ", ".join(f"{k}={v}" for k, v in rank_set.items())
    if "RANK" in ints and "WORLD_SIZE" in ints and not 0 <= ints["RANK"] < ints["WORLD_SIZE"]:
        hits.append(
            VariableHit(
                Status.FAIL,
                f"RANK={ints['RANK']} is outside 0..WORLD_SIZE-1 (WORLD_SIZE={ints['WORLD_SIZE']})",
                "fix RANK/WORLD_SIZE, or unset both and let torchrun set them",
            )
        )
    if "MASTER_PORT" in ints and not 1 <= ints["MASTER_PORT"] <= 65535:
        hits.append(
            VariableHit(Status.FAIL, f"MASTER_PORT={ints['MASTER_PORT']} is not a TCP port", "use a port in 1..65535")
        )
    if ("RANK" in ints) != ("WORLD_SIZE" in ints) or ("MASTER_ADDR" in rank_set) != ("MASTER_PORT" in rank_set):
        hits.append(
            VariableHit(
                Status.WARN,
                f"only part of RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT is set: {listed}",
                "set all four for a manual env:// launch, or none and use torchrun",
            )
        )
    if "TORCHELASTIC_RUN_ID" not in env and not any(h.status is Status.FAIL for h in earlier + hits):
        hits.append(
            VariableHit(
                Status.WARN,
                f"set outside torchrun: {listed}",
                "torchrun overrides them, but a plain `python train.py` would use them; unset them in the shell/image",
            )
        )
    return hits


_ORDER = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2}


CAUSE = "these variables change how torchrun, torch.distributed or NCCL behave"
BAKED_CAUSE = "variables baked into an image apply to every job on every cluster, and " + CAUSE
BAKED_REMEDY = "remove them from the Dockerfile ENV; set them per job if needed"


def judge(f: EnvVarsFacts) -> Finding:
    """Fails on a *_SOCKET_IFNAME that matches no interface (the remedy names an UP one, the one
    carrying the route first), on RANK / WORLD_SIZE / MASTER_PORT that are not integers or out of
    range; warns on half a manual launch or rank variables set outside torchrun; and applies the
    rules of knowledge/env_vars.yaml (settings that disable transports or change behaviour).

    An image's config Env is judged by the same rules (`image.env`), as what every container
    starts with; its interfaces are the node's, so *_SOCKET_IFNAME is not matched there.
    """
    if f.env is None:
        return skip(f.unknown_why or "the environment is not known here")
    env, rules = f.env, knowledge.env_rules()
    hits = _ifnames(env, f.network, list(rules.get("ifname_vars", []))) + _table(env, list(rules.get("rules", [])))
    hits += _ranks(env, list(rules.get("rank_vars", [])), hits)
    observed = {"env": dict(env)}
    where = " baked into the image" if f.baked else ""
    if not hits:
        shown = ", ".join(f"{k}={v}" for k, v in env.items() if k.startswith(("NCCL_", "TORCH_NCCL_")))
        return Finding(
            Status.PASS,
            f"no problematic settings{where}"
            + (f" ({shown})" if shown else " (no RANK/WORLD_SIZE/MASTER_*/NCCL_* set)"),
            observed=observed,
        )
    hits.sort(key=lambda h: _ORDER.get(h.status, 3))
    worst = hits[0].status
    remedies = [h.remedy for h in hits if h.remedy and h.status is not Status.PASS]
    if f.baked and worst is not Status.PASS:
        remedies.insert(0, BAKED_REMEDY)
    return Finding(
        worst,
        ("the image sets " if f.baked else "") + "; ".join(h.text for h in hits),
        cause=(BAKED_CAUSE if f.baked else CAUSE) if worst is not Status.PASS else None,
        remedy="\n".join(remedies) or None,
        observed=observed,
    )


CHECK = Check(
    name="env_vars",
    title="distributed environment variables",
    facts=EnvVarsFacts,
    judge=judge,
    ids={"env": "env.env_vars", "image": "image.env"},
)
