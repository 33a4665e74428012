"""A Ray Train job whose log stops before any worker printed: its workers wait for a placement group.

Lines in the formats Ray prints them: Ray 1.x's Trainer (python/ray/train/trainer.py create_logdir) and Ray Train
v2's worker group (ray/train/v2/_internal/execution/worker_group/worker_group.py). A stop there is read as a hang
(a WARN: a paste of only a run's first lines looks the same), never as a healthy run.
"""

from __future__ import annotations

from ddp_doctor.diagnose import explain_text
from ddp_doctor.report import Result, Status

RAY1 = [
    "2022-03-22 11:11:17,420\tINFO services.py:1412 -- View the Ray dashboard at http://127.0.0.1:8265",
    "2022-03-22 11:11:18,857\tINFO trainer.py:199 -- Trainer logs will be logged in: /home/u/ray_results/train_x",
]
RAY1_WORKERS = [
    (
        "(BaseWorkerMixin pid=4242) 2022-03-22 11:11:21,002\tINFO torch.py:67 -- Setting up process group for: "
        "env:// [rank=0, world_size=2]"
    ),
    (
        "(BaseWorkerMixin pid=4243) 2022-03-22 11:11:21,003\tINFO torch.py:67 -- Setting up process group for: "
        "env:// [rank=1, world_size=2]"
    ),
]
RAY_V2 = [
    "(TrainController pid=33120) [State Transition] INITIALIZING -> SCHEDULING.",
    (
        "(TrainController pid=33120) Attempting to start training worker group of size 2 with the following "
        "resources: [{'GPU': 1}] * 2"
    ),
]
RAY_V2_STARTED = [
    "(RayTrainWorker pid=24334) Setting up process group for: env:// [rank=0, world_size=2]",
    "(TrainController pid=33120) Started training worker group of size 2:",
    "(TrainController pid=33120) - (ip=10.7.37.122, pid=24334) world_rank=0, local_rank=0, node_rank=0",
]


def _hang(lines: list[str]) -> Result | None:
    return next((r for r in explain_text("\n".join(lines).encode(), "log") if r.id == "diag.hang"), None)


def test_ray1_trainer_that_stops_before_its_workers_is_a_hang_naming_gpus() -> None:
    hang = _hang(RAY1)
    assert hang is not None and hang.status is Status.WARN
    assert hang.observed["stage"] == "ray_train_start", hang.summary
    assert "num_workers" in hang.remedy and "GPU" in hang.remedy
    # its closing advice is Ray's, not the NCCL hang's (no collective or process group exists yet)
    assert "ray status" in hang.remedy and "init_process_group" not in hang.remedy


def test_ray_train_v2_worker_group_that_never_starts_is_a_hang() -> None:
    hang = _hang(RAY_V2)
    assert hang is not None and hang.status is Status.WARN and hang.observed["stage"] == "ray_train_start"


def test_ray_trainers_whose_workers_printed_are_not_a_hang() -> None:
    assert _hang(RAY1 + RAY1_WORKERS) is None
    assert _hang(RAY_V2 + RAY_V2_STARTED) is None


def test_a_script_printing_the_same_words_itself_is_not_ray_trains_start() -> None:
    # a user's own logger with Ray's words but not Ray's trainer.py record
    assert _hang(["INFO:__main__:Trainer logs will be logged in: /data/out", "loading data"]) is None
    assert _hang(["INFO:__main__:Trainer logs will be logged in: /data/out"]) is None


def _statuses(lines: list[str]) -> dict[str, Status]:
    return {r.id: r.status for r in explain_text("\n".join(lines).encode(), "log")}


def test_ray_saying_it_waits_for_resources_is_a_warning_not_a_failure() -> None:
    # Ray Train v2 retries a worker group that did not start in time (the cluster may be autoscaling)
    timed_out = (
        "(TrainController pid=33120) The worker group startup timed out after 30.0 seconds waiting for 2 workers. "
        "Potential causes include: (1) temporary insufficient cluster resources while waiting for autoscaling"
    )
    statuses = _statuses([*RAY_V2, timed_out, RAY_V2[1]])
    assert statuses.get("diag.ray_resources_pending") is Status.WARN
    assert Status.FAIL not in statuses.values()


def test_ray_trains_placement_group_timeout_is_a_failure_naming_resources() -> None:
    statuses = _statuses(
        [
            *RAY1,
            (
                "TimeoutError: Placement group creation timed out. Make sure your cluster either has enough resources "
                "or use an autoscaling cluster."
            ),
        ]
    )
    assert statuses.get("diag.ray_resources_infeasible") is Status.FAIL
