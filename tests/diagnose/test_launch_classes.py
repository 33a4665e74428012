"""Jobs that never became a whole world, and GPUs missing a feature, each read from a whole log.

Each log is written from the wording of the library or launcher that prints it (the sources in catalogue.yaml and
readers.yaml): Lightning's rank announcement, tacotron2 / waveglow's init prints, NCCL's CUDA checks, Python's
open() and a shell's redirect. Near misses must stay quiet.
"""

from __future__ import annotations

from ddp_doctor.diagnose import explain_text
from ddp_doctor.report import Result, Status


def _fails(text: str) -> list[Result]:
    return [r for r in explain_text(text, "job.log") if r.status is Status.FAIL]


def test_one_lightning_process_of_eight_waiting_is_a_hang_naming_srun() -> None:
    # sbatch asked for 8 tasks but ran `python train.py`: one process announces itself and waits for seven
    log = """Multi-processing is handled by Slurm.
GPU available: True (cuda), used: True
initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8
"""
    fails = _fails(log)
    assert fails and fails[0].id == "diag.hang"
    assert "ranks 1-7 of 8" in fails[0].summary
    assert "srun" in (fails[0].remedy or "")


def test_every_lightning_member_announced_is_not_a_missing_rank() -> None:
    log = "".join(f"Initializing distributed: GLOBAL_RANK: {r}, MEMBER: {r + 1}/2\n" for r in range(2))
    log += "All distributed processes registered. Starting with 2 processes\n"
    assert not _fails(log)


def test_a_lone_lightning_process_of_one_is_not_a_job_waiting() -> None:
    assert not _fails("initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/1\n")


def test_tacotron_style_init_that_never_completes_offers_a_stale_init_file() -> None:
    log = """python -m multiproc train.py --output_directory=out --hparams=distributed_run=True
Initializing Distributed
Initializing Distributed
"""
    results = explain_text(log, "job.log")
    hang = next(r for r in results if r.id == "diag.hang")
    assert hang.status is not Status.PASS
    assert "file:///" in (hang.remedy or "") and "earlier run" in (hang.remedy or "")


def test_tacotron_style_init_that_completed_is_quiet() -> None:
    log = "Initializing Distributed\nInitializing Distributed\nDone initializing distributed\nDone initializing distributed\nEpoch: 0\n"
    assert not _fails(log)


def test_nccl_operation_not_supported_names_vgpu_unified_memory() -> None:
    log = """vm-1:301:301 [0] NCCL INFO NCCL version 2.27.5+cuda12.9
vm-1:301:301 [0] NCCL INFO cudaDriverVersion 12080
vm-1:301:455 [0] misc/cudawrap.cc:188 NCCL WARN Cuda failure 801 'operation not supported'
vm-1:301:455 [0] NCCL INFO init.cc:1500 -> 1
torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5
"""
    fails = _fails(log)
    assert fails[0].id == "diag.cuda_not_supported"
    assert "enable_uvm" in (fails[0].remedy or "")


def test_other_cuda_failures_in_nccl_are_not_unsupported_operations() -> None:
    ids = {r.id for r in _fails("h:1:2 [1] transport/p2p.cc:275 NCCL WARN Cuda failure 'invalid argument'\n")}
    assert ids and "diag.cuda_not_supported" not in ids


def test_a_rank_log_in_a_missing_directory_is_named() -> None:
    log = """Traceback (most recent call last):
  File "/usr/lib/python3.6/runpy.py", line 193, in _run_module_as_main
    "__main__", mod_spec)
  File "/work/multiproc.py", line 22, in <module>
    stdout = None if i == 0 else open("logs/{}_GPU_{}.log".format(job_id, i), "w")
FileNotFoundError: [Errno 2] No such file or directory: 'logs/run_2024_GPU_1.log'
"""
    fails = _fails(log)
    assert fails[0].id == "diag.log_dir_missing"
    assert "mkdir -p" in (fails[0].remedy or "")


def test_a_missing_data_file_is_not_a_missing_log_directory() -> None:
    log = """Traceback (most recent call last):
  File "/work/train.py", line 40, in <module>
    with open(args.train_json) as f:
FileNotFoundError: [Errno 2] No such file or directory: 'data/train.json'
"""
    ids = {r.id for r in _fails(log)}
    assert ids and "diag.log_dir_missing" not in ids


def test_a_file_init_method_named_puts_a_stale_rendezvous_file_first() -> None:
    log = """FP16 Run: False
Distributed Run: True
Initializing Distributed
rank 0: init_process_group(backend='nccl', init_method='file:///shared/run/distributed.dpt')
h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
"""
    hang = next(r for r in explain_text(log, "job.log") if r.id == "diag.hang")
    first = hang.observed["hypotheses"][0]["cause"]
    assert "earlier run" in first
    assert len({h["cause"] for h in hang.observed["hypotheses"]}) == len(hang.observed["hypotheses"])


def test_without_a_file_url_the_network_comes_first() -> None:
    log = """h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
"""
    hang = next(r for r in explain_text(log, "job.log") if r.id == "diag.hang")
    assert "earlier run" not in hang.observed["hypotheses"][0]["cause"]


def test_an_invalid_ordinal_names_mig_slices_among_its_causes() -> None:
    # a launcher setting cuda:LOCAL_RANK where each process enumerates one MIG device
    log = """[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/train.py", line 12, in <module>
[rank1]:     torch.cuda.set_device(local_rank)
[rank1]: RuntimeError: CUDA error: invalid device ordinal
"""
    fails = _fails(log)
    assert fails[0].id == "diag.invalid_device_ordinal"
    assert "MIG" in (fails[0].cause or "") and "CUDA_VISIBLE_DEVICES=MIG-" in (fails[0].remedy or "")
