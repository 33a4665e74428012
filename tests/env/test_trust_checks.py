"""GPUs expected but hidden, busy GPUs, and NCCL / torch.distributed variables: judged from facts
(GPU shapes a CPU machine cannot produce) and through the real CLI on this CPU machine."""

from __future__ import annotations

import json
from typing import Any

from ddp_doctor.env import checks
from ddp_doctor.report import Result, Status
from tests.conftest import run_cli
from tests.env.factsbuilder import H200, make_facts

GiB = 1 << 30
NO_GPU = {
    "gpus": {
        "driver_loaded": False,
        "count": 0,
        "physical_count": 0,
        "visible": [],
        "all": [],
        "device_nodes": [],
        "error": "NVML could not start: NVML Shared Library Not Found",
    }
}


def judge(facts: dict[str, Any]) -> dict[str, Result]:
    return {r.id: r for r in checks.evaluate(facts)}


def test_cuda_visible_devices_naming_a_missing_uuid_fails_with_value_and_what_nvml_sees() -> None:
    facts = make_facts(gpus={"cuda_visible_devices": "GPU-deadbeef-0000", "visible": [], "count": 0})
    r = judge(facts)["env.gpus.expected"]
    assert r.status is Status.FAIL
    assert "CUDA_VISIBLE_DEVICES='GPU-deadbeef-0000'" in r.summary and H200["uuid"] in r.summary
    assert "NVML sees 1" in r.summary


def test_expect_gpus_catches_four_of_eight() -> None:
    eight = [{**H200, "index": i, "uuid": f"GPU-{i}"} for i in range(8)]
    facts = make_facts(
        gpus={"all": eight, "physical_count": 8, "visible": eight[:4], "count": 4, "cuda_visible_devices": "0,1,2,3"}
    )
    facts["expect_gpus"] = 8
    r = judge(facts)["env.gpus.expected"]
    assert r.status is Status.FAIL and "4 of 8" in r.summary
    facts["expect_gpus"] = 4
    assert judge(facts)["env.gpus.expected"].status is Status.PASS


def test_expect_gpus_more_than_the_node_has() -> None:
    facts = make_facts()
    facts["expect_gpus"] = 2
    r = judge(facts)["env.gpus.expected"]
    assert r.status is Status.FAIL and "NVML sees only 1" in r.summary


def test_nvidia_visible_devices_in_a_container_without_gpu_runtime() -> None:
    facts = make_facts(
        **NO_GPU,
        env={"NVIDIA_VISIBLE_DEVICES": "all"},
        container={"in_container": True, "kind": "docker", "evidence": ["/.dockerenv exists"]},
    )
    r = judge(facts)["env.gpus.expected"]
    assert r.status is Status.FAIL and "without the GPU runtime" in r.summary
    assert "--gpus all" in (r.remedy or "") and "nvidia.com/gpu=all" in (r.remedy or "")


def test_driver_missing_on_a_host() -> None:
    facts = make_facts(**NO_GPU)
    facts["expect_gpus"] = 1
    r = judge(facts)["env.gpus.expected"]
    assert r.status is Status.FAIL and "no working NVIDIA driver" in r.summary


def test_no_gpu_evidence_says_gpu_training_was_not_verified() -> None:
    for env in ({}, {"NVIDIA_VISIBLE_DEVICES": "void"}, {"NVIDIA_VISIBLE_DEVICES": "none"}):
        r = judge(make_facts(**NO_GPU, env=env))["env.gpus.expected"]
        assert r.status is Status.SKIP and "GPU training was not verified" in r.summary


def test_busy_gpu_names_pid_container_and_memory() -> None:
    busy = {
        **H200,
        "memory_used_bytes": 103 * GiB,
        "util_pct": 100.0,
        "processes": [{"pid": 4242, "used_bytes": 103 * GiB, "name": "python3", "container": "0123456789ab"}],
    }
    r = judge(make_facts(gpus={"visible": [busy], "all": [busy]}))["env.gpus.busy"]
    assert r.status is Status.WARN
    assert "pid 4242 (python3, container 0123456789ab) holds 103.0 GiB" in r.summary and "100.0%" in r.summary
    idle = {**H200, "memory_used_bytes": 600 << 20, "util_pct": 0.0, "processes": []}
    assert judge(make_facts(gpus={"visible": [idle], "all": [idle]}))["env.gpus.busy"].status is Status.PASS


def test_busy_baseline_before_the_chain_wins_over_the_later_snapshot() -> None:
    busy = {**H200, "memory_used_bytes": 50 * GiB, "util_pct": 90.0, "processes": [{"pid": 7, "used_bytes": None}]}
    facts = make_facts()
    facts["gpu_baseline"] = {"driver_loaded": True, "visible": [busy]}
    r = judge(facts)["env.gpus.busy"]
    assert r.status is Status.WARN and "pid 7" in r.summary and r.observed["when"] == "before the chain"


def test_invalid_nccl_values_name_the_variable_and_the_accepted_values() -> None:
    r = judge(make_facts(env={"NCCL_ALGO": "Bogus"}))["env.dist_vars"]
    assert r.status is Status.FAIL
    assert "NCCL_ALGO=Bogus" in r.summary and "Ring" in r.summary and "Tree" in r.summary
    r = judge(make_facts(env={"NCCL_PROTO": "LL,Fast"}))["env.dist_vars"]
    assert r.status is Status.FAIL and "'Fast'" in r.summary and "LL128" in r.summary
    r = judge(make_facts(env={"NCCL_P2P_DISABLE": "yes"}))["env.dist_vars"]
    assert r.status is Status.WARN and "0 or 1" in r.summary
    r = judge(make_facts(env={"TORCH_DISTRIBUTED_DEBUG": "VERBOSE"}))["env.dist_vars"]
    assert "OFF, INFO, DETAIL" in r.summary


def test_valid_values_including_per_collective_syntax_pass() -> None:
    env = {"NCCL_ALGO": "allreduce:tree,ring;broadcast:ring", "NCCL_PROTO": "^LL128", "NCCL_DEBUG": "warn"}
    r = judge(make_facts(env=env))["env.dist_vars"]
    assert r.status is Status.PASS, r.summary


def test_near_miss_name_did_you_mean() -> None:
    r = judge(make_facts(env={"NCCL_P2P_DISABLED": "1"}))["env.dist_vars"]
    assert r.status is Status.WARN and "did you mean NCCL_P2P_DISABLE?" in r.summary


def test_costly_values_warn_with_the_cost() -> None:
    r = judge(make_facts(env={"NCCL_DEBUG": "TRACE"}))["env.dist_vars"]
    assert r.status is Status.WARN and "slowdown" in r.summary
    r = judge(make_facts(env={"NCCL_P2P_LEVEL": "LOC"}))["env.dist_vars"]  # H200 has NVLink in the facts
    assert r.status is Status.WARN and "NVLink" in r.summary


def test_variable_newer_than_this_nccl() -> None:
    facts = make_facts(env={"NCCL_NVLS_ENABLE": "1"}, nccl={"version": "2.14.3"})
    r = judge(facts)["env.dist_vars"]
    assert r.status is Status.WARN and "added in NCCL 2.17" in r.summary


# ---- the real CLI on this CPU machine -------------------------------------------------------


def _static(*args: str, env: dict[str, str]) -> tuple[int, dict[str, dict[str, Any]]]:
    proc = run_cli("check", "--static", "--format", "json", *args, env=env, timeout=180)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, {r["id"]: r for r in json.loads(proc.stdout)["results"]}


def test_cli_nvidia_visible_devices_without_gpu_fails() -> None:
    code, r = _static(env={"NVIDIA_VISIBLE_DEVICES": "all"})
    assert code == 1 and r["env.gpus.expected"]["status"] == "fail"
    assert "NVIDIA_VISIBLE_DEVICES=all" in r["env.gpus.expected"]["summary"]


def test_cli_expect_gpus_fails_and_bad_value_is_usage_error() -> None:
    code, r = _static("--expect-gpus", "1", env={})
    assert code == 1 and r["env.gpus.expected"]["status"] == "fail"
    proc = run_cli("check", "--static", "--expect-gpus", "-1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_cli_invalid_nccl_algo_on_this_cpu_host_warns_that_it_fails_on_gpus() -> None:
    # This machine has CPU torch and no GPU: NCCL never reads NCCL_ALGO here, so a CPU/gloo job is not
    # broken by it (a FAIL would be wrong about this host); the words say when it would fail.
    code, r = _static(env={"NCCL_ALGO": "Bogus"})
    got = r["env.dist_vars"]
    assert code == 0 and got["status"] == "warn", got
    assert "NCCL_ALGO" in got["summary"] and "fails only once the job runs on GPUs" in got["summary"]


def test_invalid_nccl_value_fails_only_where_nccl_runs() -> None:
    gpu = make_facts(env={"NCCL_ALGO": "Bogus"})
    assert judge(gpu)["env.dist_vars"].status is Status.FAIL
    cpu = make_facts(env={"NCCL_ALGO": "Bogus"})
    cpu["torch"] = {**cpu["torch"], "flavour": "cpu"}
    assert judge(cpu)["env.dist_vars"].status is Status.WARN
    no_gpu = make_facts(env={"NCCL_ALGO": "Bogus"})
    no_gpu["gpus"] = {**no_gpu["gpus"], "count": 0, "physical_count": 0, "visible": []}
    no_gpu["torch"] = {**no_gpu["torch"], "device_count": 0}
    assert judge(no_gpu)["env.dist_vars"].status is Status.WARN
    assert "fails only once the job runs on GPUs" in judge(cpu)["env.dist_vars"].summary
    assert "fails only once" not in judge(gpu)["env.dist_vars"].summary


def _eight(cvd: str, visible: int) -> dict[str, Any]:
    eight = [{**H200, "index": i, "uuid": f"GPU-{i}"} for i in range(8)]
    return make_facts(
        gpus={
            "all": eight,
            "physical_count": 8,
            "visible": eight[:visible],
            "count": visible,
            "cuda_visible_devices": cvd,
        }
    )


def test_a_subset_chosen_by_cuda_visible_devices_is_what_is_expected() -> None:
    """Slurm's --gres=gpu:4 on an 8-GPU node sets CUDA_VISIBLE_DEVICES=0,1,2,3: every entry resolves, so the
    four are the job's GPUs, not four lost (it was a FAIL whose cause said the entries did not exist)."""
    r = judge(_eight("0,1,2,3", 4))["env.gpus.expected"]
    assert r.status is Status.PASS, r.summary
    assert "selected by CUDA_VISIBLE_DEVICES='0,1,2,3' of the 8" in r.summary


def test_an_entry_cuda_cannot_resolve_still_fails() -> None:
    """CUDA stops at the first entry it cannot resolve: '0,1,9,3' shows 2 of the 4 listed."""
    r = judge(_eight("0,1,9,3", 2))["env.gpus.expected"]
    assert r.status is Status.FAIL and "do not exist here" in (r.cause or "")


def test_empty_or_minus_one_hides_every_gpu_and_says_so() -> None:
    for cvd in ("", "-1", "-1,0"):
        r = judge(_eight(cvd, 0))["env.gpus.expected"]
        assert r.status is Status.FAIL, cvd
        assert "hides every GPU" in (r.cause or "") and "do not exist" not in (r.cause or ""), cvd


def test_expect_gpus_zero_requires_none() -> None:
    """`--expect-gpus 0` (a CPU run on a GPU node, CUDA_VISIBLE_DEVICES='') was read as "not given" and
    failed on the H200 (2026-12-05): 0 GPUs expected cannot fall short."""
    facts = _eight("", 0)
    facts["expect_gpus"] = 0
    r = judge(facts)["env.gpus.expected"]
    assert r.status is Status.SKIP and "--expect-gpus 0" in r.summary and "of the 8 NVML sees" in r.summary
