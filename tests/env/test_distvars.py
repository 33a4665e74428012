"""The dist_vars table (knowledge/dist_vars.yaml) and what checks/distvars.py makes of it: every entry
has a specific source, values are judged as NCCL's / torch's own parsers judge them, and NCCL_NET
is checked against the network plugin libraries really present where NCCL loads them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.checks import distvars
from ddp_doctor.env.probes import nccl_probe
from tests.conftest import run_cli
from tests.env.factsbuilder import make_facts

TABLE = distvars.table()
URL_OR_PATH = re.compile(r"https?://\S+|[A-Za-z0-9_-]+/[A-Za-z0-9_.-]+ \S*(src|torch)/\S+|NVIDIA/nccl")


def findings(env: dict[str, str], **facts: Any) -> list[distvars.VariableProblem]:
    return distvars.validate(env, make_facts(env=env, **facts))


@pytest.mark.parametrize("entry", TABLE["variables"], ids=lambda e: str(e["name"]))
def test_every_variable_has_a_specific_source(entry: dict[str, Any]) -> None:
    source = str(entry.get("source") or "")
    # Specific: a URL or a file of a named repository, not only the name of a docs page.
    assert URL_OR_PATH.search(source), (entry["name"], source)
    if "docs" in entry:
        assert entry["docs"] in TABLE["sources"], entry
    for key in ("since", "removed", "torch_since"):
        if key in entry:
            assert re.fullmatch(r"\d+\.\d+(\.\d+)?", str(entry[key])), (entry["name"], key)
    if "unverified" in entry:
        assert str(entry["unverified"]).strip(), entry["name"]


def test_every_costly_value_rule_has_a_source() -> None:
    for rule in TABLE["harmful"]:
        assert str(TABLE["sources"].get(rule["source"], rule["source"])).startswith("https://"), rule


@pytest.mark.parametrize(
    ("env", "ok"),
    [
        # torch's getCvarBool takes true/false, yes/no... in any case; anything else raises in torch.
        ({"TORCH_NCCL_BLOCKING_WAIT": "True"}, True),
        ({"TORCH_NCCL_ENABLE_MONITORING": "no"}, True),
        ({"TORCH_NCCL_BLOCKING_WAIT": "maybe"}, False),
        # NCCL's getNthreads: a multiple of 32 from 64 to 512.
        ({"NCCL_NTHREADS": "96"}, True),
        ({"NCCL_NTHREADS": "100"}, False),
        ({"NCCL_NTHREADS": "1024"}, False),
        # NCCL_NVLS_ENABLE=2 is NCCL's own default (use when supported).
        ({"NCCL_NVLS_ENABLE": "2"}, True),
        # ncclGetLevel compares with strcmp: exact case.
        ({"NCCL_P2P_LEVEL": "NVL"}, True),
        ({"NCCL_P2P_LEVEL": "nvl"}, False),
        ({"NCCL_DEBUG": "abort"}, True),
        ({"TORCH_DISTRIBUTED_DEBUG": "detail"}, True),
        ({"GLOO_DEVICE_TRANSPORT": "tcp"}, False),
        ({"NCCL_NET": "socket"}, True),
        ({"NCCL_NET": "IB"}, True),
    ],
)
def test_values_judged_as_the_readers_parse_them(env: dict[str, str], ok: bool) -> None:
    invalid = [f for f in findings(env) if "is not accepted" in f.text]
    assert (not invalid) is ok, invalid


def test_invalid_torch_bool_names_the_values_torch_takes() -> None:
    (f,) = findings({"TORCH_NCCL_BLOCKING_WAIT": "maybe"})
    assert f.status == "warn" and "true/false" in f.text and "ProcessGroupNCCL.hpp" in f.source


# ---- NCCL_NET and the network plugins actually on disk ----------------------------------


def test_plugin_names_follow_nccls_lookup() -> None:
    assert nccl_probe.net_plugin_names(None) == ["libnccl-net.so"]
    assert nccl_probe.net_plugin_names("aws-ofi,/opt/x/libnccl-net-y.so") == [
        "aws-ofi",
        "libnccl-net-aws-ofi.so",
        "/opt/x/libnccl-net-y.so",
    ]
    assert nccl_probe.net_plugin_names("libnccl-net-z.so") == ["libnccl-net-z.so"]
    assert nccl_probe.net_plugin_names("NONE") == []


def _plugins(tmp: Path, env: dict[str, str]) -> dict[str, Any]:
    # No ldconfig and no system directories: only what the test put on disk counts.
    return nccl_probe.net_plugins({"LD_LIBRARY_PATH": str(tmp), **env}, None, None, use_ldconfig=False, default_dirs=())


def test_nccl_net_naming_no_plugin_warns_with_where_it_looked(tmp_path: Path) -> None:
    env = {"NCCL_NET": "Foo", "NCCL_NET_PLUGIN": "foo", "LD_LIBRARY_PATH": str(tmp_path)}
    plugins = _plugins(tmp_path, env)
    assert plugins["found"] == []
    (f,) = findings(env, nccl={"net_plugins": plugins})
    assert f.status == "warn" and f.variable == "NCCL_NET"
    assert "NCCL_NET=Foo" in f.text and "IB or Socket" in f.text
    assert "libnccl-net-foo.so" in f.text and str(tmp_path) in f.text


def test_nccl_net_with_a_plugin_library_present_is_not_judged(tmp_path: Path) -> None:
    (tmp_path / "libnccl-net-foo.so").write_bytes(b"\x7fELF")  # found by name, as dlopen would look for it
    env = {"NCCL_NET": "Foo", "NCCL_NET_PLUGIN": "foo"}
    plugins = _plugins(tmp_path, env)
    assert plugins["found"] == [{"where": "LD_LIBRARY_PATH", "path": str(tmp_path / "libnccl-net-foo.so")}]
    assert findings(env, nccl={"net_plugins": plugins}) == []
    # Without NCCL_NET_PLUGIN NCCL loads libnccl-net.so, which is not there: warn again.
    assert _plugins(tmp_path, {"NCCL_NET": "Foo"})["found"] == []


def test_nccl_net_plugin_none_turns_plugins_off(tmp_path: Path) -> None:
    (tmp_path / "libnccl-net.so").write_bytes(b"\x7fELF")
    env = {"NCCL_NET": "Foo", "NCCL_NET_PLUGIN": "none"}
    (f,) = findings(env, nccl={"net_plugins": _plugins(tmp_path, env)})
    assert "NCCL_NET_PLUGIN=none" in f.text


def test_report_without_plugin_facts_is_not_judged() -> None:
    assert findings({"NCCL_NET": "Foo"}, nccl={"net_plugins": None}) == []


def _static(env: dict[str, str]) -> tuple[int, dict[str, Any]]:
    proc = run_cli("check", "--static", "--format", "json", env=env, timeout=180)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, {r["id"]: r for r in json.loads(proc.stdout)["results"]}["env.dist_vars"]


def test_cli_nccl_net_warns_never_fails_and_a_real_plugin_file_silences_it(tmp_path: Path) -> None:
    env = {"NCCL_NET": "Foo", "LD_LIBRARY_PATH": str(tmp_path)}
    code, r = _static(env)
    assert r["status"] == "warn", r
    assert "NCCL_NET=Foo" in r["summary"] and "IB or Socket" in r["summary"] and str(tmp_path) in r["summary"]
    assert code in (0, 1)  # other checks decide; NCCL_NET alone never FAILs
    (tmp_path / "libnccl-net.so").write_bytes(b"\x7fELF")
    _, r = _static(env)
    assert r["status"] == "pass", r


def test_cli_nccl_net_plugin_by_name(tmp_path: Path) -> None:
    # NCCL_NET_PLUGIN=foo makes NCCL load libnccl-net-foo.so: absent -> WARN, present -> PASS.
    env = {"NCCL_NET": "Foo", "NCCL_NET_PLUGIN": "foo", "LD_LIBRARY_PATH": str(tmp_path)}
    _, r = _static(env)
    assert r["status"] == "warn" and "libnccl-net-foo.so" in r["summary"], r
    (tmp_path / "libnccl-net-foo.so").write_bytes(b"\x7fELF")
    _, r = _static(env)
    assert r["status"] == "pass", r


# ---- names: a real variable is never a typo ----------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "NCCL_MIN_P2P_NCHANNELS",
        "NCCL_TUNER_PLUGIN",
        "NCCL_P2P_PXN_LEVEL",
        "NCCL_IB_GDR_LEVEL",
        "TORCH_NCCL_RANKS_PER_ROOT",
    ],
)
def test_real_variables_outside_the_table_are_not_did_you_mean(name: str) -> None:
    # Each is read by NCCL's source or torch's headers, and is close to a judged name.
    assert name in TABLE["known_names"]
    assert findings({name: "1"}) == []


def test_a_typo_of_an_unjudged_real_name_points_at_it() -> None:
    (f,) = findings({"NCCL_TUNER_PLUGINS": "x"})
    assert "did you mean NCCL_TUNER_PLUGIN?" in f.text and f.remedy == "rename it: NCCL_TUNER_PLUGIN=x"


def test_known_names_are_not_also_judged_entries() -> None:
    judged = {v["name"] for v in TABLE["variables"]}
    assert not judged & set(TABLE["known_names"])
    assert len(TABLE["known_names"]) == len(set(TABLE["known_names"]))


def test_old_torch_names_say_whether_torch_still_reads_them() -> None:
    (f,) = findings({"NCCL_AVOID_RECORD_STREAMS": "1"})
    assert "old name of TORCH_NCCL_AVOID_RECORD_STREAMS" in f.text and "no longer reads it" in f.text
    (f,) = findings({"NCCL_DESYNC_DEBUG": "1"})
    assert "still reads it" in f.text and f.remedy == "rename it: TORCH_NCCL_DESYNC_DEBUG=1"
    # env.env_vars (env_vars.yaml) already warns about this one: not said twice.
    assert findings({"NCCL_BLOCKING_WAIT": "1"}) == []
