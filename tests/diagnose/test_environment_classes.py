"""Failures of the machine, the container or the launcher around the job, each read from a whole log.

Each log is written from the wording of the library, kernel or launcher that prints it (the signature's sources
in catalogue.yaml); the MPI one comes from a real run of the torch installed here. Paths are shortened.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ddp_doctor.diagnose import explain_text
from ddp_doctor.report import Result, Status

SP = "/opt/venv/lib/python3.11/site-packages"


def _results(text: str) -> list[Result]:
    return explain_text(text, "job.log")


def _root(text: str) -> Result:
    failing = [r for r in _results(text) if r.status is Status.FAIL]
    assert failing, "the log was called healthy"
    return failing[0]


def _ids(text: str) -> set[str]:
    return {r.id for r in _results(text) if r.status is Status.FAIL}


def test_a_container_that_lost_its_gpus_after_a_systemd_reload() -> None:
    # a pod printing `nvidia-smi -L` in a loop, before and after `systemctl daemon-reload` on its host
    log = """GPU 0: NVIDIA A100-PCIE-40GB (UUID: GPU-551720f0-caf0-22b7-f525-2a51a6ab478d)
GPU 0: NVIDIA A100-PCIE-40GB (UUID: GPU-551720f0-caf0-22b7-f525-2a51a6ab478d)
Failed to initialize NVML: Unknown Error
Failed to initialize NVML: Unknown Error
"""
    root = _root(log)
    assert root.id == "diag.container_lost_gpus"
    assert "nvidia-ctk system create-dev-char-symlinks" in (root.remedy or "")


def test_nvml_version_mismatch_is_not_a_lost_container() -> None:
    ids = _ids("Failed to initialize NVML: Driver/library version mismatch\n")
    assert "diag.nvml_driver_mismatch" in ids and "diag.container_lost_gpus" not in ids


def test_windows_paging_file_too_small_in_a_dataloader_worker() -> None:
    log = r"""train: Scanning D:\data\labels... 1100 images, 106 backgrounds, 0 corrupt:  98%|#########8| 1206/1232
Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "D:\anaconda3\envs\t\lib\multiprocessing\spawn.py", line 116, in spawn_main
    exitcode = _main(fd, parent_sentinel)
  File "D:\anaconda3\envs\t\lib\multiprocessing\spawn.py", line 125, in _main
    prepare(preparation_data)
  File "D:\anaconda3\envs\t\lib\runpy.py", line 87, in _run_code
    exec(code, run_globals)
  File "D:\work\train.py", line 30, in <module>
    import torch
  File "D:\anaconda3\envs\t\lib\site-packages\torch\__init__.py", line 124, in <module>
    raise err
OSError: [WinError 1455] The paging file is too small for this operation to complete. Error loading "D:\anaconda3\envs\t\lib\site-packages\torch\lib\caffe2_detectron_ops_gpu.dll" or one of its dependencies.
"""
    assert _root(log).id == "diag.windows_paging_file"


def test_windows_paging_file_in_a_chinese_windows() -> None:
    log = r"""  File "D:\envs\t\lib\site-packages\torch\__init__.py", line 124, in <module>
    raise err
OSError: [WinError 1455] 页面文件太小，无法完成操作。 Error loading "D:\envs\t\lib\site-packages\torch\lib\cudnn_cnn_infer64_8.dll" or one of its dependencies.
"""
    assert _root(log).id == "diag.windows_paging_file"


def test_backend_mpi_on_the_torch_installed_here_is_named() -> None:
    # a real run: the torch wheel installed here has no MPI, as every pip / conda wheel
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29613", "RANK": "0", "WORLD_SIZE": "1"}
    code = "import torch.distributed as dist; dist.init_process_group('mpi')"
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode != 0
    root = _root(proc.stderr)
    assert root.id == "diag.mpi_backend_missing"


def test_an_old_libgomp_found_first() -> None:
    log = f"""Traceback (most recent call last):
  File "/work/train.py", line 1, in <module>
    import torch
  File "{SP}/torch/__init__.py", line 237, in <module>
    from torch._C import *  # noqa: F403
ImportError: /usr/lib/x86_64-linux-gnu/libgomp.so.1: version `GOMP_5.0' not found (required by {SP}/torch/lib/libtorch_cpu.so)
"""
    root = _root(log)
    assert root.id == "diag.libgomp_too_old"
    assert "diag.libstdcxx_too_old" not in _ids(log)


def test_libgomp_without_room_in_the_static_tls_block() -> None:
    log = f"""Traceback (most recent call last):
  File "/work/train.py", line 2, in <module>
    import torch
  File "{SP}/torch/__init__.py", line 189, in <module>
    _load_global_deps()
  File "{SP}/torch/__init__.py", line 142, in _load_global_deps
    ctypes.CDLL(lib_path, mode=ctypes.RTLD_GLOBAL)
  File "/usr/lib/python3.10/ctypes/__init__.py", line 374, in __init__
    self._handle = _dlopen(self._name, mode)
OSError: /usr/lib/aarch64-linux-gnu/libgomp.so.1: cannot allocate memory in static TLS block
"""
    root = _root(log)
    assert root.id == "diag.static_tls_exhausted"
    assert "diag.host_oom" not in _ids(log)  # "cannot allocate memory" here is not the host's RAM


def test_lightning_refuses_one_slurm_task_per_node_for_several_gpus() -> None:
    log = f"""GPU available: True (cuda), used: True
Traceback (most recent call last):
  File "/work/train.py", line 88, in <module>
    trainer = Trainer(accelerator="gpu", devices=4, num_nodes=2, strategy="ddp")
  File "{SP}/lightning/pytorch/trainer/connectors/accelerator_connector.py", line 664, in _lazy_init_strategy
    self.cluster_environment.validate_settings(num_devices=self._parallel_devices, num_nodes=self._num_nodes_flag)
  File "{SP}/lightning/fabric/plugins/environments/slurm.py", line 169, in validate_settings
    raise ValueError(
ValueError: You set `devices=4` in Lightning, but the number of tasks per node configured in SLURM `--ntasks-per-node=1` does not match. HINT: Set `devices=1`.
srun: error: gpu-node-07: task 0: Exited with exit code 1
srun: error: gpu-node-08: task 1: Exited with exit code 1
"""
    root = _root(log)
    assert root.id == "diag.slurm_tasks_vs_devices"


def test_a_lightning_job_waiting_for_ranks_slurm_never_started_names_the_task_count() -> None:
    # Lightning before its check: each of the 2 tasks (one per node) announces itself as one of 8, then waits
    log = """GPU available: True (cuda), used: True
TPU available: False, using: 0 TPU cores
Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8
Initializing distributed: GLOBAL_RANK: 4, MEMBER: 5/8
"""
    root = _root(log)
    assert root.id == "diag.hang"
    causes = " ".join(h["cause"] for h in root.observed["hypotheses"])
    assert "one task per node" in causes


def test_host_memory_killed_by_an_old_kernel_is_not_a_cuda_oom() -> None:
    log = """Epoch 3:  41%|####      | 410/1000 [12:01<17:18,  1.76s/it]
[ 8123.456001] python invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0
[ 8123.456789] Out of memory: Kill process 41234 (python) score 912 or sacrifice child
[ 8123.461002] Killed process 41234 (python) total-vm:98123456kB, anon-rss:61234567kB, file-rss:0kB
"""
    ids = _ids(log)
    assert _root(log).id == "diag.sigkill_oom"
    assert "diag.cuda_oom" not in ids


def test_a_pod_killed_for_memory_reported_by_kubectl() -> None:
    log = """step 120 loss 2.31
step 121 loss 2.29
command terminated with exit code 137
"""
    assert _root(log).id == "diag.sigkill_oom"


def test_ray_memory_monitor_in_its_older_form() -> None:
    old = f"""(pid=11474, ip=192.168.0.15)
  File "python/ray/_raylet.pyx", line 446, in ray._raylet.execute_task
  File "{SP}/ray/memory_monitor.py", line 140, in raise_if_low_memory
    self.error_threshold))
ray.memory_monitor.RayOutOfMemoryError: More than 95% of the memory on node suwi is used (30.47 / 31.3 GB). The top 10 memory consumers are:
"""
    assert _root(old).id == "diag.ray_memory_pressure"


def test_a_cuda_oom_inside_a_ray_task_stays_a_cuda_oom() -> None:
    # Ray names a task's exception by its class only: torch's OutOfMemoryError is not Ray's memory monitor
    log = """ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.generate_sequences() (pid=4242, ip=10.0.0.3)
  File "/opt/venv/lib/python3.11/site-packages/torch/nn/functional.py", line 2143, in softmax
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB
"""
    ids = _ids(log)
    assert _root(log).id == "diag.cuda_oom"
    assert "diag.ray_memory_pressure" not in ids


def test_a_ray_actor_whose_process_died_points_at_host_memory() -> None:
    log = """ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.
	class_name: WorkerDict
	actor_id: 0fa1c2d3e4f5a6b7c8d9e0f101000000
	pid: 480334
"""
    root = _root(log)
    assert root.id == "diag.ray_worker_died"


def test_cuda_oom_stays_cuda_oom() -> None:
    log = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB\n"
    ids = _ids(log)
    assert "diag.cuda_oom" in ids
    assert not ids & {"diag.sigkill_oom", "diag.host_oom", "diag.ray_memory_pressure"}


def test_ranks_in_containers_on_a_compose_network_cannot_reach_each_other() -> None:
    log = """[W socket.cpp:601] [c10d] The client socket has failed to connect to [172.18.0.3]:41234 (errno: 113 - No route to host).
RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [172.18.0.3]:41234: No route to host
"""
    ids = _ids(log)
    assert "diag.container_bridge_address" in ids


def test_an_aws_default_vpc_address_is_not_called_a_docker_bridge() -> None:
    log = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [172.31.40.7]:41234: No route to host\n"
    assert "diag.container_bridge_address" not in _ids(log)


def test_dask_cuda_refusing_the_visible_devices_it_was_given() -> None:
    log = f"""Traceback (most recent call last):
  File "/work/cluster.py", line 6, in <module>
    cluster = LocalCUDACluster()
  File "{SP}/dask_cuda/local_cuda_cluster.py", line 241, in __init__
    self.cuda_visible_devices = [parse_cuda_visible_device(dev) for dev in CUDA_VISIBLE_DEVICES]
  File "{SP}/dask_cuda/utils.py", line 493, in parse_cuda_visible_device
    raise ValueError(
ValueError: Devices in CUDA_VISIBLE_DEVICES must be comma-separated integers or strings beginning with 'GPU-' or 'MIG-' prefixes.
"""
    assert _root(log).id == "diag.visible_devices_mishandled"


def test_a_uuid_in_cuda_visible_devices_read_as_a_number() -> None:
    log = """  File "/work/train.py", line 14, in <module>
    gpus = [int(d) for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",")]
ValueError: invalid literal for int() with base 10: 'GPU-9baca7f5-0f2f-01ac-6b05-8da14d6e9005'
"""
    assert _root(log).id == "diag.visible_devices_mishandled"


def test_mpirun_reporting_a_rank_killed_by_signal_9() -> None:
    log = """[user@host02 bin]$ mpirun -np 4 -npernode 1 -machinefile hosts.txt ./solver
mpirun noticed that process rank 0 with PID 21183 on node host01 exited on signal 9 (Killed).
"""
    assert _root(log).id == "diag.sigkill_oom"


def test_the_deepspeed_launcher_refusing_a_slot_it_did_not_count() -> None:
    log = f"""[2024-07-30 10:02:11,120] [INFO] [real_accelerator.py:203:get_accelerator] Setting ds_accelerator to cuda (auto detect)
Traceback (most recent call last):
  File "/opt/venv/bin/deepspeed", line 6, in <module>
    main()
  File "{SP}/deepspeed/launcher/runner.py", line 463, in main
    active_resources = parse_inclusion_exclusion(resource_pool, args.include, args.exclude)
  File "{SP}/deepspeed/launcher/runner.py", line 330, in parse_resource_filter
    raise ValueError(f"No slot {{slot!r}} specified on host {{hostname!r}}")
ValueError: No slot '2' specified on host 'localhost'
"""
    root = _root(log)
    assert root.id == "diag.deepspeed_slot_missing"
    assert "--include localhost:" in (root.remedy or "")


def test_one_slurm_task_per_gpu_each_running_torchrun_is_told_to_start_one_per_node() -> None:
    # srun --ntasks-per-node=2 on each node, every task running `torchrun --nproc-per-node 2`: the second
    # launcher on a node cannot take the store's port the first one holds
    log = f"""W1205 10:02:11.120000 4242 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed.
Traceback (most recent call last):
  File "/opt/venv/bin/torchrun", line 8, in <module>
    sys.exit(main())
  File "{SP}/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 159, in _create_tcp_store
    store = TCPStore(
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use
srun: error: gpu-node-07: task 1: Exited with exit code 1
"""
    root = _root(log)
    assert root.id == "diag.port_in_use"
    assert "--ntasks-per-node=1" in (root.remedy or "")
