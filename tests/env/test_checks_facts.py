"""Judging facts dicts: GPU cases that cannot be produced on a CPU machine, built in the facts shape."""

from __future__ import annotations

from typing import Any

from ddp_doctor.env import checks
from ddp_doctor.report import Result, Status
from tests.env.factsbuilder import H200, make_facts


def judge(facts: dict[str, Any]) -> dict[str, Result]:
    return {r.id: r for r in checks.evaluate(facts)}


def test_healthy_gpu_node_passes_everything() -> None:
    results = judge(make_facts())
    assert {r.status for r in results.values()} <= {Status.PASS, Status.SKIP}, [
        (r.id, r.status, r.summary) for r in results.values() if r.status not in (Status.PASS, Status.SKIP)
    ]
    assert results["env.gpus"].status is Status.PASS and "NVIDIA H200" in results["env.gpus"].summary
    assert results["env.gpu_arch"].status is Status.PASS and "sm_90" in results["env.gpu_arch"].summary
    assert results["env.driver_cuda"].status is Status.PASS


def test_every_check_id_is_present_and_stable() -> None:
    ids = [r.id for r in checks.evaluate(make_facts())]
    assert ids == [
        "env.python",
        "env.torch.installed",
        "env.torch.import",
        "env.torch.build",
        "env.numpy",
        "env.official_build",
        "env.distributed",
        "env.nccl",
        "env.torchrun",
        "env.gpus",
        "env.driver_cuda",
        "env.gpu_arch",
        "env.gpu_topology",
        "env.shm",
        "env.ulimits",
        "env.container",
        "env.user",
        "env.env_vars",
        "env.network",
        "env.gpus.expected",
        "env.gpus.busy",
        "env.dist_vars",
    ]


def test_driver_470_with_cuda_12_6_fails() -> None:
    r = judge(make_facts(gpus={"driver_version": "470.256.02", "cuda_driver_version": "11.4"}))["env.driver_cuda"]
    assert r.status is Status.FAIL
    assert "470.256.02" in r.summary and "12.6" in r.summary and "525.60.13" in r.summary
    assert r.remedy and "560.28.03" in r.remedy


def test_older_driver_of_the_same_major_runs_by_minor_compatibility() -> None:
    r = judge(make_facts(gpus={"driver_version": "535.183.01", "cuda_driver_version": "12.2"}))["env.driver_cuda"]
    assert r.status is Status.WARN
    assert "minor version compatibility" in r.summary and "560.28.03" in (r.remedy or "")


def test_driver_newer_than_runtime_passes() -> None:
    r = judge(make_facts(gpus={"driver_version": "580.65.06", "cuda_driver_version": "13.0"}))["env.driver_cuda"]
    assert r.status is Status.PASS


def test_sm_90_missing_from_arch_list_fails_with_no_kernel_image() -> None:
    facts = make_facts(torch={"arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"]})
    r = judge(facts)["env.gpu_arch"]
    assert r.status is Status.FAIL
    assert "no kernel image for sm_90" in r.summary and "NVIDIA H200" in r.summary
    assert r.remedy and "download.pytorch.org/whl/" in r.remedy


def test_blackwell_on_cu126_build_points_to_cu128() -> None:
    b200 = dict(H200, name="NVIDIA B200", compute_capability="10.0")
    r = judge(make_facts(gpus={"visible": [b200], "all": [b200]}))["env.gpu_arch"]
    assert r.status is Status.FAIL and "sm_100" in r.summary
    assert r.remedy and "whl/cu128" in r.remedy


def test_nccl_missing_from_cuda_build_fails() -> None:
    facts = make_facts(
        nccl={"library": None, "source": None, "loadable": None, "version": None}, torch={"nccl_version": None}
    )
    r = judge(facts)["env.nccl"]
    assert r.status is Status.FAIL
    assert "this environment cannot run DDP on GPUs" in r.summary


def test_cuda_build_without_nccl_backend_fails_in_distributed_too() -> None:
    facts = make_facts(torch={"backends": {"nccl": False, "gloo": True, "mpi": False}})
    results = judge(facts)
    assert results["env.distributed"].status is Status.FAIL
    assert "cannot run DDP on GPUs" in results["env.distributed"].summary
    assert results["env.nccl"].status is Status.FAIL


def test_unloadable_nccl_fails() -> None:
    facts = make_facts(nccl={"loadable": False, "error": "libnccl.so.2: cannot open shared object file"})
    r = judge(facts)["env.nccl"]
    assert r.status is Status.FAIL and "cannot open shared object file" in r.summary


def test_nccl_other_than_the_release_ships_warns() -> None:
    r = judge(make_facts(nccl={"version": "2.21.5"}))["env.nccl"]
    assert r.status is Status.WARN and "2.26.2" in r.summary and "2.21.5" in r.summary


def test_2_7_cu126_is_official() -> None:
    r = judge(make_facts())["env.official_build"]
    assert r.status is Status.PASS and "cu118, cu126, cu128" in r.summary


def test_2_7_cu121_is_a_custom_build_listing_official_variants() -> None:
    r = judge(make_facts(torch={"version": "2.7.0+cu121", "cuda": "12.1"}))["env.official_build"]
    assert r.status is Status.WARN
    assert "custom build" in r.summary and "cu121" in r.summary and "cu118, cu126, cu128" in r.summary


def test_vendor_build_without_variant_tag_is_custom() -> None:
    r = judge(make_facts(torch={"version": "2.7.0a0+79aa17489c.nv25.04"}))["env.official_build"]
    assert r.status is Status.WARN and "not an official wheel tag" in r.summary


def test_cpu_torch_with_gpus_fails() -> None:
    facts = make_facts(
        torch={
            "version": "2.7.0+cpu",
            "metadata_version": "2.7.0+cpu",
            "cuda": None,
            "flavour": "cpu",
            "arch_list": [],
            "backends": {"nccl": False, "gloo": True, "mpi": False},
        }
    )
    r = judge(facts)["env.torch.build"]
    assert r.status is Status.FAIL and "CPU-only" in r.summary and r.remedy and "whl/cu" in r.remedy


def test_torch_missing_fails_with_install_command() -> None:
    facts = make_facts(torch={"__replace__": True, "installed": False, "version": None, "importable": None})
    results = judge(facts)
    r = results["env.torch.installed"]
    assert r.status is Status.FAIL and r.remedy and "-m pip install" in r.remedy and "--index-url" in r.remedy
    # CUDA 12.8 driver: the newest release's newest variant it can run, not a CUDA 13 wheel
    assert "whl/cu13" not in r.remedy
    for dependent in ("env.torch.import", "env.distributed", "env.nccl", "env.torchrun"):
        assert results[dependent].status is Status.SKIP, dependent


def test_import_error_keeps_the_text_and_explains_it() -> None:
    err = "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    r = judge(make_facts(torch={"importable": False, "import_error": err}))["env.torch.import"]
    assert r.status is Status.FAIL and "libcudnn.so.9" in r.summary
    assert r.cause and "shared library" in r.cause and r.remedy and "--force-reinstall" in r.remedy


def test_numpy_clash_is_named() -> None:
    err = "ImportError: numpy.core.multiarray failed to import"
    r = judge(make_facts(torch={"importable": False, "import_error": err}))["env.torch.import"]
    assert r.cause and "NumPy" in r.cause and "numpy<2" in (r.remedy or "")


def test_gpu_nodes_without_nvml_in_container_says_gpus_runtime() -> None:
    facts = make_facts(
        gpus={
            "__replace__": True,
            "driver_loaded": False,
            "error": "NVML could not start: NVML Shared Library Not Found",
            "count": 0,
            "physical_count": 0,
            "visible": [],
            "all": [],
            "device_nodes": ["/dev/nvidia0", "/dev/nvidiactl"],
        },
        container={"in_container": True, "kind": "docker", "evidence": ["/.dockerenv exists"]},
    )
    results = judge(facts)
    assert results["env.container"].status is Status.FAIL
    assert "--gpus" in (results["env.container"].remedy or "") and "--gpus" in (results["env.container"].cause or "")
    assert results["env.gpus"].status is Status.FAIL


def test_no_driver_skips_gpu_checks_with_words() -> None:
    facts = make_facts(
        gpus={
            "__replace__": True,
            "driver_loaded": False,
            "error": "NVML could not start: NVML Shared Library Not Found",
            "count": 0,
            "physical_count": 0,
            "visible": [],
            "all": [],
            "device_nodes": [],
        }
    )
    results = judge(facts)
    for id_ in ("env.gpus", "env.driver_cuda", "env.gpu_arch", "env.gpu_topology"):
        assert results[id_].status is Status.SKIP, id_
    assert "no NVIDIA driver" in results["env.gpus"].summary and "gloo" in results["env.gpus"].summary


def test_cuda_visible_devices_empty_hides_all() -> None:
    r = judge(make_facts(gpus={"visible": [], "count": 0, "cuda_visible_devices": ""}))["env.gpus"]
    assert r.status is Status.WARN and "hides the 1 GPU;" in r.summary


def test_mig_warns() -> None:
    mig = dict(H200, mig_mode="enabled")
    r = judge(make_facts(gpus={"visible": [mig], "all": [mig]}))["env.gpus"]
    assert r.status is Status.WARN and "MIG" in r.summary


def test_topology_without_p2p_warns() -> None:
    two = [H200, dict(H200, index=1, uuid="GPU-2")]
    pairs = [
        {
            "a": 0,
            "b": 1,
            "p2p_read": "chipset not supported",
            "p2p_nvlink": "not supported",
            "path": "across NUMA nodes",
        }
    ]
    r = judge(
        make_facts(gpus={"visible": two, "all": two, "count": 2, "physical_count": 2}, topology={"pairs": pairs})
    )["env.gpu_topology"]
    assert r.status is Status.WARN and "0<->1" in r.summary


def test_shm_thresholds() -> None:
    fail = judge(make_facts(shm={"size_bytes": 64 << 20, "free_bytes": 64 << 20}))["env.shm"]
    assert fail.status is Status.FAIL and "64 MiB" in fail.summary
    assert (
        fail.remedy
        and "--shm-size=4g" in fail.remedy  # 4 GiB per GPU (checks/knowledge.yaml); this host has 1 GPU
        and "medium: Memory" in fail.remedy
        and "--ipc=host" in fail.remedy
    )
    warn = judge(make_facts(shm={"size_bytes": 512 << 20, "free_bytes": 512 << 20}))["env.shm"]
    assert warn.status is Status.WARN
    assert judge(make_facts())["env.shm"].status is Status.PASS


def test_memlock_limited_with_infiniband_warns() -> None:
    facts = make_facts(
        ulimits={"memlock_soft_bytes": 64 << 10},
        network={"infiniband": {"devices": ["mlx5_0"], "libibverbs": "/usr/lib/x86_64-linux-gnu/libibverbs.so.1"}},
    )
    r = judge(facts)["env.ulimits"]
    assert r.status is Status.WARN and "memlock=-1" in (r.remedy or "")


def test_root_warns_with_non_root_remedy() -> None:
    r = judge(make_facts(user={"uid": 0, "name": "root", "root": True}))["env.user"]
    assert r.status is Status.WARN and "USER" in (r.remedy or "") and "runAsNonRoot" in (r.remedy or "")


def test_socket_ifname_naming_a_missing_interface_fails() -> None:
    r = judge(make_facts(env={"NCCL_SOCKET_IFNAME": "ib0"}))["env.env_vars"]
    assert r.status is Status.FAIL and "ib0" in r.summary and "eth0" in r.summary
    ok = judge(make_facts(env={"NCCL_SOCKET_IFNAME": "eth"}))["env.env_vars"]  # NCCL matches prefixes
    assert ok.status is Status.PASS
    excluded = judge(make_facts(env={"NCCL_SOCKET_IFNAME": "^docker,lo"}))["env.env_vars"]
    assert excluded.status is Status.PASS


def test_p2p_and_ib_disable_warn_once() -> None:
    results = judge(make_facts(env={"NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1"}))
    r = results["env.dist_vars"]
    assert r.status is Status.WARN and "NCCL_P2P_DISABLE=1" in r.summary and "NCCL_IB_DISABLE=1" in r.summary
    assert "NCCL_P2P_DISABLE" not in results["env.env_vars"].summary  # one verdict per variable


def test_rank_outside_world_size_warns_for_a_plain_launch() -> None:
    # torchrun (and `check`'s own launch) replace RANK, so the job here is not broken by it; a plain
    # `python train.py` reading env:// is, and the words say so.
    r = judge(make_facts(env={"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "29500"}))[
        "env.env_vars"
    ]
    assert r.status is Status.WARN and "RANK=4" in r.summary and "python train.py" in r.summary


def test_torchrun_from_another_env_warns() -> None:
    facts = make_facts(
        torchrun={"path": "/usr/local/bin/torchrun", "shebang_python": "/usr/bin/python3", "same_env": False}
    )
    r = judge(facts)["env.torchrun"]
    assert r.status is Status.WARN and "/usr/bin/python3" in r.summary


def test_malformed_facts_are_an_error_not_a_pass() -> None:
    facts = make_facts(gpus={"visible": "not-a-list-of-devices"})
    results = judge(facts)
    assert results["env.gpus"].status is not Status.PASS


def test_missing_nvml_binding_is_an_error_not_a_skip() -> None:
    facts = make_facts(
        gpus={
            "__replace__": True,
            "driver_loaded": False,
            "nvml_missing": True,
            "count": 0,
            "visible": [],
            "error": "nvidia-ml-py is not installed (No module named 'pynvml'); reinstall ddp-doctor",
        }
    )
    r = judge(facts)["env.gpus"]
    assert r.status is Status.ERROR and "nvidia-ml-py" in (r.remedy or "")


def test_install_suggestion_fits_an_old_driver() -> None:
    facts = make_facts(
        torch={"__replace__": True, "installed": False, "version": None, "importable": None},
        gpus={"driver_version": "520.61.05", "cuda_driver_version": "11.8"},
    )
    remedy = judge(facts)["env.torch.installed"].remedy or ""
    assert "'torch==2.7.*'" in remedy and "whl/cu118" in remedy  # cu118 ended with 2.7


def test_install_suggestion_without_gpus_is_cpu() -> None:
    facts = make_facts(
        torch={"__replace__": True, "installed": False, "version": None, "importable": None},
        gpus={"__replace__": True, "driver_loaded": False, "physical_count": 0, "count": 0, "visible": []},
    )
    assert "whl/cpu" in (judge(facts)["env.torch.installed"].remedy or "")


def test_cudnn_is_shown_as_a_version() -> None:
    assert "cuDNN 9.5.1" in judge(make_facts())["env.torch.build"].summary


def test_torch_build_checks_alone_for_the_image_audit() -> None:
    facts = {"torch": make_facts()["torch"], "nccl": make_facts()["nccl"]}
    results = checks.evaluate(facts, tags={"torch_build"})
    assert {r.id for r in results} == {"env.torch.build", "env.official_build", "env.distributed", "env.nccl"}
    assert all(r.status is Status.PASS for r in results), [(r.id, r.summary) for r in results]


def test_pypi_wheel_metadata_without_local_tag_is_the_same_torch() -> None:
    facts = make_facts(
        torch={"version": "2.11.0+cu130", "metadata_version": "2.11.0", "cuda": "13.0"},
        gpus={"driver_version": "580.159.04", "cuda_driver_version": "13.0"},
    )
    assert judge(facts)["env.torch.build"].status is Status.PASS
    two = make_facts(torch={"version": "2.9.0+cu128", "metadata_version": "2.11.0"})
    assert judge(two)["env.torch.build"].status is Status.WARN


def test_numpy_missing_warns_about_the_object_collectives() -> None:
    from ddp_doctor.env import checks
    from tests.env.factsbuilder import make_facts

    facts = make_facts(torch={"numpy": None})
    result = next(r for r in checks.evaluate(facts) if r.id == "env.numpy")
    assert result.status.value == "warn" and "Numpy is not available" in result.summary
    facts["torch"]["numpy"] = "2.1.0"
    assert next(r for r in checks.evaluate(facts) if r.id == "env.numpy").status.value == "pass"
