"""The variable table (knowledge/variables.yaml) and what checks/variables.py makes of it: every entry
has a specific source, values are judged as NCCL's / torch's own parsers judge them (an empty one
too), one verdict per variable wherever it is set, settings no library reads name what people meant,
no remedy proposes a value outside a variable's range, and NCCL_NET is checked against the network
plugin libraries really present where NCCL loads them."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ddp_doctor.checks import variables
from ddp_doctor.checks.facts.host import VariableContext, dist_env
from ddp_doctor.env.probes import nccl_probe
from ddp_doctor.report import Status
from tests.conftest import run_cli
from tests.env.factsbuilder import make_facts

TABLE = variables.table()
URL_OR_PATH = re.compile(r"https?://\S+|[A-Za-z0-9_-]+/[A-Za-z0-9_.-]+ \S*(src|torch)/\S+|NVIDIA/nccl")


def findings(env: dict[str, str], **facts: Any) -> list[variables.VariableVerdict]:
    """The verdicts that say something is wrong, as `check` weighs them on a GPU host."""
    verdicts = variables.judge(env, VariableContext.from_env(make_facts(env=env, **facts)))
    return [v for v in verdicts if v.status != "pass"]


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


def test_every_setting_rule_has_a_source() -> None:
    for rule in TABLE["settings"]:
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
    # The new name refuses the old value: the remedy names what it takes instead of proposing it.
    (f,) = findings({"NCCL_ASYNC_ERROR_HANDLING": "5"})
    assert f.remedy == "rename it to TORCH_NCCL_ASYNC_ERROR_HANDLING and set it to one of 0, 1, 2, 3"


# ---- one verdict per variable, on hosts with and without GPUs -------------------------------


def _both(env: dict[str, str], facts: dict[str, Any]) -> tuple[Any, Any]:
    from ddp_doctor.env import checks

    results = {r.id: r for r in checks.evaluate(facts)}
    return results["env.env_vars"], results["env.dist_vars"]


def _cpu_host(env: dict[str, str]) -> dict[str, Any]:
    facts = make_facts(env=env)
    facts["torch"] = {**facts["torch"], "flavour": "cpu", "device_count": 0}
    facts["gpus"] = {**facts["gpus"], "count": 0, "physical_count": 0, "visible": [], "all": []}
    return facts


NAMES = sorted(
    {str(v["name"]) for v in TABLE["variables"]} | {b["name"] for b in TABLE["beliefs"]} | set(TABLE["renamed"])
)


def test_each_variable_is_judged_by_one_check_only() -> None:
    """Every name of the table, with an empty, an invalid and a valid-looking value, on a GPU host and a
    CPU host: it is named in at most one of env.env_vars and env.dist_vars."""
    for name in [*NAMES, "RANK", "WORLD_SIZE", "MASTER_PORT", "NCCL_P2P_DISABLED"]:
        for value in ("", "bogus", "1", "0", "1800"):
            for facts in (make_facts(env={name: value}), _cpu_host({name: value})):
                env_vars, dist_vars = _both({name: value}, facts)
                said = [r.id for r in (env_vars, dist_vars) if re.search(rf"\b{name}\b", r.summary)]
                assert len(said) <= 1, (name, value, said, env_vars.summary, dist_vars.summary)


def test_empty_nccl_debug_is_one_verdict_nccl_reads_it_as_unset() -> None:
    env_vars, dist_vars = _both({"NCCL_DEBUG": ""}, make_facts(env={"NCCL_DEBUG": ""}))
    assert env_vars.status is dist_vars.status is Status.PASS
    assert "debug output is on" not in env_vars.summary + dist_vars.summary
    assert "NCCL_DEBUG is empty: NCCL reads it as unset" in dist_vars.summary
    on = _both({"NCCL_DEBUG": "INFO"}, make_facts(env={"NCCL_DEBUG": "INFO"}))[1]
    assert on.status is Status.PASS and "debug output is on" in on.summary
    bad = _both({"NCCL_DEBUG": "verbose"}, make_facts(env={"NCCL_DEBUG": "verbose"}))[1]
    assert bad.status is Status.WARN and "'verbose' is not accepted" in bad.summary


def test_cuda_visible_devices_judged_once_with_and_without_gpus() -> None:
    from ddp_doctor.env import checks

    # No GPU here: only its form can be judged, and "abc" hides every GPU on any host.
    env_vars, _ = _both({"CUDA_VISIBLE_DEVICES": "abc"}, _cpu_host({"CUDA_VISIBLE_DEVICES": "abc"}))
    assert env_vars.status is Status.WARN and "CUDA_VISIBLE_DEVICES='abc' hides every GPU" in env_vars.summary
    assert "no problematic settings" not in env_vars.summary
    hidden_on_purpose, _ = _both({"CUDA_VISIBLE_DEVICES": ""}, _cpu_host({"CUDA_VISIBLE_DEVICES": ""}))
    assert hidden_on_purpose.status is Status.PASS  # how a CPU job is told to leave the GPUs alone
    # With GPUs the GPU checks judge it against them; env.env_vars does not say it a second time.
    facts = make_facts(env={"CUDA_VISIBLE_DEVICES": "abc"})
    facts["gpus"] = {**facts["gpus"], "cuda_visible_devices": "abc"}
    results = {r.id: r for r in checks.evaluate(facts)}
    assert "CUDA_VISIBLE_DEVICES" not in results["env.env_vars"].summary
    said = [i for i, r in results.items() if "CUDA_VISIBLE_DEVICES" in r.summary and i != "env.env_vars"]
    assert said, {i: r.summary for i, r in results.items()}


def test_rank_abc_is_one_warning_torchrun_replaces_it() -> None:
    env_vars, _ = _both({"RANK": "abc"}, make_facts(env={"RANK": "abc"}))
    assert env_vars.status is Status.WARN
    assert env_vars.summary.count("RANK") == 1 and "not an integer" in env_vars.summary
    assert "torchrun replaces it" in env_vars.summary


def test_empty_torch_distributed_debug_fails_and_torch_really_refuses_it() -> None:
    """The table says torch refuses an empty TORCH_DISTRIBUTED_DEBUG; torch on this machine does, with gloo."""
    import subprocess
    import sys

    code = (
        "import torch.distributed as d\n"
        "d.init_process_group('gloo', init_method='tcp://127.0.0.1:0', rank=0, world_size=1)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={"TORCH_DISTRIBUTED_DEBUG": "", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0 and "TORCH_DISTRIBUTED_DEBUG must be OFF, INFO, or DETAIL" in done.stderr
    _, dist_vars = _both({"TORCH_DISTRIBUTED_DEBUG": ""}, _cpu_host({"TORCH_DISTRIBUTED_DEBUG": ""}))
    assert dist_vars.status is Status.FAIL and "TORCH_DISTRIBUTED_DEBUG is empty" in dist_vars.summary


# ---- settings no library reads ---------------------------------------------------------------


def test_nccl_timeout_is_a_belief_with_the_real_knob_never_ib_timeout() -> None:
    (f,) = findings({"NCCL_TIMEOUT": "1800"})
    assert f.kind == "belief" and "no library reads NCCL_TIMEOUT" in f.text
    assert "timeout=datetime.timedelta(seconds=1800)" in (f.remedy or "")
    assert "--rdzv-conf join_timeout=1800" in (f.remedy or "") and "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=1800" in (
        f.remedy or ""
    )
    assert "NCCL_IB_TIMEOUT" not in f.text + (f.remedy or "")
    assert "nvidia.github.io/OSMO" in f.source  # where the belief comes from
    (odd,) = findings({"NCCL_TIMEOUT": "30m"})  # not a number of seconds: the knobs are shown with N
    assert "seconds=<N>" in (odd.remedy or "") and "30m" not in (odd.remedy or "")


def test_a_near_miss_whose_value_does_not_fit_is_not_a_typo() -> None:
    (f,) = findings({"NCCL_IB_TIMEOUTS": "1800"})
    assert "did you mean" not in f.text and "not a misspelling" in f.text
    assert "NCCL_IB_TIMEOUT=1800" not in (f.remedy or "")
    (typo,) = findings({"NCCL_IB_TIMEOUTS": "22"})
    assert (
        "did you mean NCCL_IB_TIMEOUT?" in typo.text
        and typo.remedy == "rename it: NCCL_IB_TIMEOUT=22  (an integer >= 1 and <= 31)"
    )


def test_cli_nccl_timeout_in_a_shell_a_manifest_an_image_config_and_checks_environment(tmp_path: Path) -> None:
    """The same wrong-belief verdict, with the real knob, wherever NCCL_TIMEOUT is set."""
    _, r = _static({"NCCL_TIMEOUT": "1800"})
    assert r["status"] == "warn"
    host = re.search(r"NCCL_TIMEOUT=1800: [^;]*;[^;]*", r["summary"])
    assert host, r["summary"]
    (tmp_path / "train.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus-per-node=8\nexport NCCL_TIMEOUT=1800\n"
        "srun torchrun --nproc-per-node 8 train.py\n"
    )
    (tmp_path / "job.yaml").write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: t}\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: t\n        image: img:1\n        command: [torchrun, --nproc-per-node=1, t.py]\n"
        "        resources: {limits: {nvidia.com/gpu: 1}}\n        env: [{name: NCCL_TIMEOUT, value: '1800'}]\n"
    )
    (tmp_path / "Dockerfile").write_text("FROM nvcr.io/nvidia/pytorch:24.05-py3\nENV NCCL_TIMEOUT=1800\nUSER 1000\n")
    proc = run_cli("lint", "--format", "json", *(str(tmp_path / n) for n in ("train.sbatch", "job.yaml", "Dockerfile")))
    found = [x for x in json.loads(proc.stdout)["results"] if x["id"].endswith(".variable_not_read")]
    assert {x["id"] for x in found} == {
        "lint.slurm.variable_not_read",
        "lint.k8s.variable_not_read",
        "lint.dockerfile.variable_not_read",
    }
    for x in found:
        assert host.group(0) in x["summary"], (host.group(0), x["summary"])
        assert x["remedy"] == r["remedy"] and "timeout=datetime.timedelta(seconds=1800)" in x["remedy"]


def test_the_host_probe_an_image_and_lint_record_every_name_the_table_judges_whatever_its_prefix() -> None:
    """TORCH_CPP_LOG_LEVEL used to be judged by lint alone: the host probe and an image's Env dropped it."""
    judged = [*(v["name"] for v in TABLE["variables"]), *(b["name"] for b in TABLE["beliefs"])]
    judged += [*TABLE["renamed"], *TABLE["rank_vars"], *TABLE["ifname_vars"]]
    env = dict.fromkeys(judged, "1") | {"HOME": "/root", "TORCH_HOME": "/cache"}
    assert dist_env(env) == dict.fromkeys(sorted(judged), "1")
    assert "TORCH_CPP_LOG_LEVEL" in dist_env({"TORCH_CPP_LOG_LEVEL": "LOUD"})


def test_cli_a_build_option_set_at_run_time_is_a_belief_in_check_a_shell_and_a_manifest(tmp_path: Path) -> None:
    """TORCH_USE_CUDA_DSA is a macro torch is compiled with (c10/cuda/CUDADeviceAssertionHost.cpp
    `#ifdef TORCH_USE_CUDA_DSA`; at run time it reads PYTORCH_USE_CUDA_DSA): whatever its prefix, the
    host probe records it and check, lint of a shell script and of a manifest give the same verdict."""
    proc = run_cli("check", "--static", "--format", "json", env={"TORCH_USE_CUDA_DSA": "1"}, timeout=180)
    r = {x["id"]: x for x in json.loads(proc.stdout)["results"]}["env.env_vars"]
    assert r["status"] == "warn" and "TORCH_USE_CUDA_DSA=1: no library reads TORCH_USE_CUDA_DSA" in r["summary"]
    assert "PYTORCH_USE_CUDA_DSA=1" in r["remedy"] and "CUDA_LAUNCH_BLOCKING=1" in r["remedy"]
    (tmp_path / "run.sh").write_text("export TORCH_USE_CUDA_DSA=1\ntorchrun --nproc-per-node 1 train.py\n")
    (tmp_path / "job.yaml").write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: t}\nspec:\n  template:\n    spec:\n      containers:\n"
        "      - name: t\n        image: img:1\n        command: [torchrun, --nproc-per-node=1, t.py]\n"
        "        resources: {limits: {nvidia.com/gpu: 1}}\n        env: [{name: TORCH_USE_CUDA_DSA, value: '1'}]\n"
    )
    proc = run_cli("lint", "--format", "json", str(tmp_path / "run.sh"), str(tmp_path / "job.yaml"))
    found = [x for x in json.loads(proc.stdout)["results"] if x["id"].endswith(".variable_not_read")]
    assert {x["id"] for x in found} == {"lint.shell.variable_not_read", "lint.k8s.variable_not_read"}
    for x in found:
        assert x["remedy"] == r["remedy"], (x["remedy"], r["remedy"])


# ---- no remedy proposes a value outside a variable's range -----------------------------------

_ASSIGNMENT = re.compile(r"\b([A-Z][A-Z0-9_]*_[A-Z0-9_]+)=([^\s;,)]*)")


def _sample_values(entry: dict[str, Any]) -> list[str]:
    values = ["", "bogus", "0", "1", "-1", "2", "31", "32", "100", "1800", "99999", "yes", "true", "Ring", "ib0"]
    return values + [str(v) for v in entry.get("values") or []]


def _proposals(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in _ASSIGNMENT.finditer(text) if m.group(2) and m.group(2)[0] not in "{<"]


def test_no_remedy_anywhere_proposes_a_value_outside_the_range() -> None:
    """Walk the table: every variable, belief, old name and near miss (a letter added, dropped or
    doubled) with many values, on a GPU host and a CPU host, and every fixed text of the table. Any
    NAME=VALUE a remedy proposes for a variable the table knows must be one that variable accepts."""
    names = [*NAMES]
    for v in TABLE["variables"]:
        n = str(v["name"])
        names += [n + "S", n[:-1], n.replace("_", "__", 1)]
    checked = 0
    for name in names:
        entry = variables.spec(name) or {"type": "string"}
        for value in _sample_values(entry):
            for facts in (make_facts(env={name: value}), _cpu_host({name: value})):
                for verdict in variables.judge({name: value}, VariableContext.from_env(facts)):
                    for target, proposed in _proposals(verdict.remedy or ""):
                        spec = variables.spec(target)
                        if spec is not None and spec["type"] not in ("string", "path", "ifname"):
                            checked += 1
                            assert variables.invalid(proposed, spec) is None, (name, value, verdict.remedy)
    for rule in TABLE["settings"]:
        for target, proposed in _proposals(str(rule.get("remedy") or "")):
            spec = variables.spec(target)
            assert spec is None or variables.invalid(proposed, spec) is None, rule
    assert checked > 100  # the walk really met proposals


def test_the_table_holds_only_the_keys_its_records_declare() -> None:
    # table() hands out variables.yaml as these TypedDicts: a key they do not declare would go unchecked.
    def keys(kind: type) -> set[str]:
        return set(kind.__required_keys__ | kind.__optional_keys__)  # type: ignore[attr-defined]

    assert set(TABLE) <= keys(variables.VariablesTable)
    for kind, entries in (
        (variables.VariableSpec, TABLE["variables"]),
        (variables.Renamed, TABLE["renamed"].values()),
        (variables.Belief, TABLE["beliefs"]),
        (variables.Setting, TABLE["settings"]),
    ):
        for entry in entries:
            assert set(entry) <= keys(kind), (kind.__name__, set(entry) - keys(kind))
    assert {v["type"] for v in TABLE["variables"]} <= set(variables.TYPES)


def test_a_verdict_travels_in_a_result_and_a_malformed_one_is_refused() -> None:
    (verdict,) = variables.judge({"NCCL_IB_TIMEOUT": "40"}, VariableContext(nccl_runs=False))
    assert variables.VariableVerdict.from_dict(verdict.to_dict()) == verdict
    for broken in ({**verdict.to_dict(), "text": None}, {**verdict.to_dict(), "dormant": "no"}):
        with pytest.raises(TypeError, match="verdicts"):
            variables.VariableVerdict.from_dict(broken)


def _one_edit_toward(a: str, b: str) -> set[str]:
    """Names one letter away from a, at the places where a and b differ (the typos that sit between them)."""
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789"
    differ = [i for i in range(min(len(a), len(b))) if a[i] != b[i]] or [min(len(a), len(b)) - 1]
    out = set()
    for i in differ[:2]:
        out |= {a[:i] + c + a[i + 1 :] for c in letters} | {a[:i] + a[i + 1 :]} | {a[:i] + c + a[i:] for c in letters}
    return out


def test_did_you_mean_never_proposes_a_name_of_another_meaning() -> None:
    """Walk the table: every pair of real names within two edits of each other (NCCL_MIN_NCHANNELS and
    NCCL_MAX_NCHANNELS, NCCL_IB_TC and NCCL_IB_SL), and the typos between them. A rename is proposed only to
    the one real name strictly nearest the typo; a typo as near to two is told so, with no rename."""
    real = sorted({*NAMES, *TABLE["known_names"]})
    near = {a: [b for b in difflib.get_close_matches(a, real, n=6, cutoff=0.75) if b != a] for a in real}
    pairs = [(a, b) for a in real for b in near[a] if variables.edits(a, b) <= 2]
    assert len(pairs) > 20  # the table really has such neighbours
    walked = ambiguous = 0
    host = VariableContext.from_env(make_facts())
    typos = sorted({t for a, b in pairs for t in _one_edit_toward(a, b)} - set(real))
    for typo in typos:
        for f in variables.judge({typo: "1"}, host):
            m = re.search(r"did you mean (\S+)\?", f.text)
            if m is None:
                ambiguous += "as close to" in f.text
                continue
            walked += 1
            nearest = variables.edits(typo, m.group(1))
            rivals = difflib.get_close_matches(typo, real, n=8, cutoff=0.75)  # every name within two edits
            others = [r for r in rivals if r != m.group(1) and variables.edits(typo, r) <= nearest]
            assert not others, (typo, m.group(1), others)
    assert walked > 100 and ambiguous > 10
