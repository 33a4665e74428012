"""Reading launcher command lines: torchrun / ddp-doctor flags, and `docker|podman run` options."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ddp_doctor.deploy.lint.datasets import data_paths
from ddp_doctor.deploy.lint.model import At, Launch
from ddp_doctor.deploy.lint.shellparse import Functions, Word, commands, filled

TORCHRUN_FLAGS = {
    "--nproc-per-node": "nproc",
    "--nproc_per_node": "nproc",
    "--nnodes": "nnodes",
    "--rdzv-endpoint": "rdzv_endpoint",
    "--rdzv_endpoint": "rdzv_endpoint",
    "--master-addr": "master_addr",
    "--master_addr": "master_addr",
    "--node-rank": "node_rank",
    "--node_rank": "node_rank",
    "--rdzv-backend": "rdzv_backend",
    "--rdzv_backend": "rdzv_backend",
}
DOCTOR_FLAGS = {"--nproc": "nproc", "--nnodes": "nnodes", "--rdzv-endpoint": "rdzv_endpoint", "--backend": "backend"}
ACCELERATE_FLAGS = {
    "--num_processes": "num_processes",
    "--num-processes": "num_processes",
    "--num_machines": "nnodes",
    "--num-machines": "nnodes",
    "--main_process_ip": "master_addr",
    "--main-process-ip": "master_addr",
    "--rdzv_backend": "rdzv_backend",
    "--rdzv-backend": "rdzv_backend",
    "--machine_rank": "node_rank",
    "--machine-rank": "node_rank",
    "--config_file": "config_file",
    "--config-file": "config_file",
}
DETECTRON2_FLAGS = {
    "--num-gpus": "nproc",
    "--num-machines": "nnodes",
    "--machine-rank": "node_rank",
}
DEEPSPEED_FLAGS = {
    "--num_gpus": "nproc",
    "--num-gpus": "nproc",
    "--num_nodes": "nnodes",
    "--num-nodes": "nnodes",
    "--master_addr": "master_addr",
    "--master-addr": "master_addr",
    "--hostfile": "hostfile",
    "-H": "hostfile",
}
# Flags of the training script that tell what it runs on / how many DataLoader workers it starts.
BACKEND_FLAGS = (
    "--backend",
    "--dist-backend",
    "--dist_backend",
    "--ddp-backend",
    "--ddp_backend",
    "--distributed-backend",  # Megatron-LM
    "--distributed_backend",
)
OUTPUT_FLAGS = (
    "--output_dir",
    "--output-dir",
    "--out_dir",
    "--outdir",
    "--save_dir",
    "--save-dir",
    "--checkpoint_dir",
    "--checkpoint-dir",
    "--ckpt_dir",
    "--ckpt-dir",
    "--checkpoint_path",
    "--checkpoint-path",
    "--log_dir",
    "--log-dir",
    "--logdir",
    "--train_dir",
    "--model_dir",
    "--results_dir",
    "--project",  # ultralytics/yolov5: runs are saved under --project/--name
    "--output_path",
    "--output-path",
    "--save_path",
    "--save-path",
    "--dist_checkpoint_root_folder",  # llama-recipes' FSDP checkpoints (train_config.dist_checkpoint_root_folder)
    "--model-prefix",  # weaver, MXNet's examples: the path prefix the model is saved under
    "--model_prefix",
)
"""Flags of training scripts that say where checkpoints, logs or the trained model are written."""
OUTPUT_FILE_FLAGS = ("--log", "--log-file", "--log_file")
"""Flags that name a log file in some scripts (weaver's --log: "path to the log file", hqucms/weaver-core
weaver/train.py) and a level or a name suffix in others: an output only where the value is a path."""
OUTPUT_OVERRIDES = ("OUTPUT_DIR",)
"""Config overrides given as `KEY VALUE` words after the script's flags (yacs configs of detectron2 and
maskrcnn-benchmark: `train_net.py --config-file X.yaml OUTPUT_DIR /results`;
https://detectron2.readthedocs.io/en/latest/tutorials/getting_started.html)."""
OUTPUT_KEYS = ("output_dir", "checkpoint_dir", "ckpt_dir", "save_dir", "log_dir", "default_root_dir")
"""The last part of a `key=value` / `a.b.key=value` override (Hydra, OmegaConf, torchtune's `tune run ...
output_dir=...`; https://pytorch.org/torchtune/stable/deep_dives/configs.html) that names where outputs go."""
DATA_FLAGS = (
    "--data",
    "--data_dir",
    "--data-dir",
    "--datadir",
    "--data_path",
    "--data-path",
    "--data_root",
    "--data-root",
    "--dataset_dir",
    "--dataset-dir",
    "--dataset_path",
    "--dataset-path",
    "--train_data",
    "--train-data",
)
"""Flags of training scripts that say where the data set is read from."""
WORKER_FLAGS = ("--num_workers", "--num-workers", "--workers", "-j", "--dataloader_num_workers", "--data-workers")
SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}
REMOTE_STARTERS = {"mpirun", "mpiexec", "pdsh", "ssh", "clush", "pssh", "parallel-ssh", "orterun", "prun"}
"""Commands that start the launcher on other nodes themselves (so no srun is needed)."""
MPI_STARTERS = {"mpirun", "mpiexec", "orterun", "horovodrun", "mpiexec.hydra"}
"""Starters that are the launcher themselves when no torchrun-like launcher follows: their ranks are
the processes of the program they start (one per slot)."""
MPI_TOTAL = ("-np", "-n", "--np", "-c")
MPI_PER_NODE = ("-npernode", "--npernode", "-N", "--N")
MPI_HOSTS = ("-H", "--host", "-host", "--hostfile", "-hostfile", "--machinefile", "-machinefile", "-f", "-hosts")
"""mpirun's own hosts (Open MPI, and Hydra's -f / -hosts), in place of the hostfile its environment gives."""
MPI_FLAGS_ALONE = frozenset(
    {
        "--allow-run-as-root",
        "--oversubscribe",
        "-oversubscribe",
        "--nooversubscribe",
        "-nooversubscribe",
        "--tag-output",
        "-tag-output",
        "--timestamp-output",
        "-timestamp-output",
        "--report-bindings",
        "-report-bindings",
        "--display-map",
        "-display-map",
        "--display-allocation",
        "-display-allocation",
        "--display-devel-map",
        "--use-hwthread-cpus",
        "-use-hwthread-cpus",
        "--merge-stderr-to-stdout",
        "-merge-stderr-to-stdout",
        "--noprefix",
        "--enable-recovery",
        "--disable-recovery",
        "--preload-binary",
        "-s",
        "-v",
        "--verbose",
        "-q",
        "--quiet",
        "-d",
        "--debug",
        "--debug-devel",
        "-nolocal",
        "--nolocal",
        "-bind-to-core",
        "-bind-to-socket",
        "-bycore",
        "-bysocket",
        "-bynode",
        "-byslot",
        "--xml",
        "-l",
        "-prepend-rank",
        "-genvall",
        "-genvnone",
        "-envall",
        "-envnone",
        "-print-rank-map",
        "-print-all-exitcodes",
        "-ordered-output",
        "-verbose",
        "-info",
        "--gloo",
        "--mpi",
        "--disable-cache",
    }
)
"""mpirun / mpiexec / horovodrun options that take no value; every other option takes one, but these two-value
ones (Open MPI's MCA parameters, Hydra's -env NAME VALUE). mpirun reads its options up to the program, whose own
flags follow it (`mpirun [options] <program> [<args>]`: Open MPI's mpirun(1),
https://docs.open-mpi.org/en/v5.0.x/man-openmpi/man1/mpirun.1.html; MPICH's Hydra usage,
https://github.com/pmodels/mpich/blob/main/doc/wiki/how_to/Using_the_Hydra_Process_Manager.md; horovodrun -h)."""
MPI_TWO_VALUES = frozenset({"--mca", "-mca", "--gmca", "-gmca", "-genv", "-env", "--tune-mca"})
SCRIPT_DEPTH = 3
TRAINING_NAME = re.compile(r"(?i)train|fine_?tun|finetun")
"""A program named for training (train.py, finetune.sh, pkg.train)."""
TORCH_RUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def _flag_values(words: list[Word], table: dict[str, str] | tuple[str, ...]) -> dict[str, At[str]]:
    names = table if isinstance(table, dict) else {n: n for n in table}
    found: dict[str, At[str]] = {}
    for i, w in enumerate(words):
        name, eq, value = w.text.partition("=")
        if name in names:
            if eq:
                found[names[name]] = At(value, w.line)
            elif i + 1 < len(words) and not words[i + 1].text.startswith("--"):
                found[names[name]] = At(words[i + 1].text, words[i + 1].line)
    return found


def _python_module(words: list[Word], i: int) -> str | None:
    """`python [-u -O ...] -m MODULE` starting at words[i] -> MODULE."""
    if not os.path.basename(words[i].text).startswith("python"):
        return None
    j = i + 1
    while j < len(words) and words[j].text.startswith("-") and not words[j].text.startswith("-m"):
        j += 1
    if j + 1 < len(words) and words[j].text == "-m":
        return words[j + 1].text
    if j < len(words) and words[j].text.startswith("-m") and len(words[j].text) > 2:
        return words[j].text[2:]
    return None


TOOL_MODULES = frozenset(
    {"pip", "venv", "ensurepip", "site", "compileall", "http.server", "json.tool", "timeit", "torch.utils.collect_env"}
)
"""Modules `python -m` runs as a tool (installing, serving, reporting), not as a program of the job's own."""


def program_at(words: list[Word]) -> int | None:
    """The index of the word naming the program a command runs: a script (`train.py`, `run.sh`), or the
    module of `python [-u ...] -m pkg.main` (python's -m: run the module as the program); None for a tool
    module (`python -m pip`) or a command that names neither."""
    for i, w in enumerate(words):
        if not w.text.startswith("-") and w.text.endswith((".py", ".sh")):
            return i
        module = _python_module(words, i)
        if module is not None and module not in TOOL_MODULES:
            return next(k for k in range(i + 1, len(words)) if words[k].text.endswith(module))
    return None


def launcher_at(words: list[Word], i: int) -> tuple[str, int] | None:
    """(tool, index of its first own argument) when words[i] starts a distributed launcher."""
    base = os.path.basename(words[i].text)
    if base == "torchrun":
        return "torchrun", i + 1
    if base in ("accelerate", "accelerate-launch") and (base != "accelerate" or _next(words, i) == "launch"):
        return "accelerate", i + (2 if base == "accelerate" else 1)
    if base == "deepspeed":
        return "deepspeed", i + 1
    if base == "tune" and _next(words, i) == "run":
        return "tune", i + 2
    if base == "ddp-doctor" and _next(words, i) == "check":
        return "ddp-doctor", i + 2
    if base.startswith("python") and any(w.text.partition("=")[0] == "--num-gpus" for w in words[i + 1 :]):
        # detectron2's launch() (default_argument_parser): --num-gpus processes per machine, spawned by the script.
        script = next((j for j in range(i + 1, len(words)) if words[j].text.endswith(".py")), None)
        if script is not None and words[script].text.endswith("train_net.py"):  # tools/(plain_|lazyconfig_)train_net.py
            return "detectron2", script
    module = _python_module(words, i)
    if module is not None:
        at = next(j for j in range(i, len(words)) if words[j].text in ("-m", f"-m{module}")) + 1
        at += 1 if words[at - 1].text == "-m" else 0
        if module in TORCH_RUN_MODULES:
            return "torchrun", at
        if module in ("accelerate.commands.launch",):
            return "accelerate", at
        if module == "deepspeed.launcher.runner":
            return "deepspeed", at
    return None


def _next(words: list[Word], i: int) -> str:
    return words[i + 1].text if i + 1 < len(words) else ""


def _int_at(value: At[str] | None) -> At[int] | None:
    if value is None:
        return None
    text = value.value.strip("'\"")
    return At(int(text), value.line) if text.isdigit() else None


def _srun(words: list[Word], upto: int) -> tuple[bool, At[int] | None, At[int] | None, At[int] | None]:
    """(under srun, -N, --ntasks-per-node, GPUs per node) from the srun options before words[upto]."""
    start = next((j for j in range(upto) if os.path.basename(words[j].text) == "srun"), None)
    if start is None:
        return False, None, None, None
    opts = words[start + 1 : upto]
    values = _flag_values(
        opts,
        {
            "-N": "nodes",
            "--nodes": "nodes",
            "--ntasks-per-node": "tpn",
            "--gres": "gres",
            "--gpus-per-node": "gpn",
            "--gpus-per-task": "gpt",
            "-n": "ntasks",
            "--ntasks": "ntasks",
        },
    )
    for w in opts:  # -N2 glued
        if w.text.startswith("-N") and w.text[2:].isdigit():
            values["nodes"] = At(w.text[2:], w.line)
    gpus = _int_at(values.get("gpn")) or _int_at(values.get("gpt"))
    if gpus is None and "gres" in values:
        gpus = gres_gpus(values["gres"])
    nodes = values.get("nodes")
    node_count = _int_at(At(nodes.value.split("-")[-1], nodes.line)) if nodes else None
    tasks, per = _int_at(values.get("ntasks")), _int_at(values.get("tpn"))
    if node_count is not None and tasks is not None and 0 < tasks.value < node_count.value:
        node_count = At(tasks.value, tasks.line)  # srun(1): never more nodes than tasks
    if node_count is None and tasks is not None and per is not None and per.value > 0:
        node_count = At(-(-tasks.value // per.value), tasks.line)  # -n N --ntasks-per-node K: ceil(N / K) nodes
    if per is None and tasks is not None and node_count is not None and node_count.value > 0:
        # srun's own -n over -N: its tasks spread over its nodes, whatever the batch's --ntasks-per-node says
        # (srun(1): --ntasks takes precedence, --ntasks-per-node is then a maximum).
        per = At(-(-tasks.value // node_count.value), tasks.line)
    return True, node_count, per, gpus


def srun_tasks(words: list[Word], upto: int) -> At[int] | None:
    """`srun -n/--ntasks N` before words[upto]."""
    start = next((j for j in range(upto) if os.path.basename(words[j].text) == "srun"), None)
    if start is None:
        return None
    values = _flag_values(words[start + 1 : upto], {"-n": "ntasks", "--ntasks": "ntasks"})
    for w in words[start + 1 : upto]:  # -n1 glued
        if w.text.startswith("-n") and w.text[2:].isdigit():
            values["ntasks"] = At(w.text[2:], w.line)
    return _int_at(values.get("ntasks"))


def srun_nodes_what(words: list[Word], upto: int) -> str:
    """How the srun before words[upto] gives its node count, for messages."""
    start = next((j for j in range(upto) if os.path.basename(words[j].text) == "srun"), upto)
    opts = [w.text.split("=", 1)[0] for w in words[start + 1 : upto]]
    explicit = any(o in ("-N", "--nodes") or (o.startswith("-N") and o[2:].isdigit()) for o in opts)
    return "srun -N" if explicit or not any(o in ("-n", "--ntasks") for o in opts) else "srun -n / --ntasks-per-node"


def srun_exports(words: list[Word], upto: int) -> dict[str, At[str]]:
    """`srun --export=ALL,NAME=VALUE,...` before words[upto]: the variables the step's tasks get."""
    start = next((j for j in range(upto) if os.path.basename(words[j].text) == "srun"), None)
    if start is None:
        return {}
    found = _flag_values(words[start + 1 : upto], {"--export": "export"}).get("export")
    if found is None:
        return {}
    pairs = (item.partition("=") for item in found.value.split(","))
    return {k: At(v, found.line) for k, eq, v in pairs if eq and k not in ("ALL", "NONE", "NIL")}


def gres_gpus(value: At[str]) -> At[int] | None:
    """--gres=gpu:8, gpu:a100:8, gpu:a100:8(S:0-1), gpu -> GPUs per node."""
    for item in value.value.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] != "gpu":
            continue
        if len(parts) == 1:
            return At(1, value.line)
        last = parts[-1]
        return At(int(last), value.line) if last.isdigit() else (At(1, value.line) if len(parts) == 2 else None)
    return None


SUBMITTER_NODE_FLAGS = ("--num_nodes", "--num-nodes", "--nodes", "--replicas")
"""A job submitter's count of the nodes that each run the command given after `--`: open-instruct's
mason.py (`--num_nodes 2 ... -- torchrun ...`, allenai/open-instruct mason.py), beaker-gantry
(`gantry run --replicas 2 -- torchrun ...`, allenai/beaker-gantry README)."""


def _submitted_nodes(words: list[Word], upto: int) -> tuple[At[int], str] | None:
    """The node count of a submitter whose `--` hands words[upto] (the launcher) to every node it starts."""
    dash = next((j for j in range(upto - 1, -1, -1) if words[j].text == "--"), None)
    if dash is None:
        return None
    # Setup the nodes run first (`-- source env.sh \&\& torchrun ...`: operators handed over as words),
    # then only VAR=value words may stand before the launcher.
    start = max([j for j in range(dash + 1, upto) if words[j].text in ("&&", ";", "||")], default=dash)
    if any("=" not in w.text.split("/")[0] for w in words[start + 1 : upto]):
        return None
    values = _flag_values(words[:dash], {flag: flag for flag in SUBMITTER_NODE_FLAGS})
    for flag, value in values.items():
        count = _int_at(value)
        if count is not None:
            submitter = next((os.path.basename(w.text) for w in words[:dash] if w.text.endswith(".py")), None)
            return count, f"{submitter or os.path.basename(words[0].text)} {flag}"
    return None


def _launch(words: list[Word], i: int, tool: str, at: int) -> Launch:
    rest = words[at:]
    srun, srun_nodes, srun_tpn, srun_gpus = _srun(words, i)
    launch = Launch(tool, words[i].line, under_srun=srun, srun_nodes=srun_nodes)
    launch.srun_nodes_what = srun_nodes_what(words, i)
    launch.srun_tasks = srun_tasks(words, i)
    submitted = _submitted_nodes(words, i) if not srun else None
    if submitted is not None:
        launch.srun_nodes, launch.srun_nodes_what = submitted
    launch.expanded_before_srun = srun
    launch.srun_tasks_per_node, launch.srun_gpus = srun_tpn, srun_gpus
    launch.exports = srun_exports(words, i)
    table: dict[str, str] = {
        "torchrun": TORCHRUN_FLAGS,
        "tune": TORCHRUN_FLAGS,
        "ddp-doctor": DOCTOR_FLAGS,
        "accelerate": ACCELERATE_FLAGS,
        "deepspeed": DEEPSPEED_FLAGS,
        "detectron2": DETECTRON2_FLAGS,
    }[tool]
    script_at = _entry_at(rest)
    # torchrun, accelerate launch and deepspeed hand every word after the script to the script
    # (argparse REMAINDER): only the words before it are the launcher's own.
    own = rest[:script_at] if script_at is not None and tool in AFTER_SCRIPT_FLAGS else rest
    values = _flag_values(own, table)
    if script_at is not None and tool in AFTER_SCRIPT_FLAGS:
        launch.entry = At(rest[script_at].text, rest[script_at].line)
        launch.after_script = _after_script(rest[script_at + 1 :], table, AFTER_SCRIPT_FLAGS[tool], set(values))
    if tool == "accelerate":
        total, machines = _int_at(values.pop("num_processes", None)), _int_at(values.get("nnodes"))
        # --num_processes counts every machine's: per machine only where the machines are a number (a
        # `--num_machines $NNODES` lint cannot read leaves the ranks per node unknown, not the total).
        if total is not None and (machines is not None or "nnodes" not in values):
            per = total.value // (machines.value if machines else 1)
            values["nproc"] = At(str(per), total.line)
        if any(w.text == "--cpu" for w in rest) or any(w.text.startswith("--mpirun_hostfile") for w in rest):
            launch.device_hint = At("cpu", next(w.line for w in rest if w.text.startswith(("--cpu", "--mpirun"))))
        elif any(w.text in ("--multi_gpu", "--multi-gpu", "--gpu_ids") for w in rest):
            launch.device_hint = At(
                "gpu", next(w.line for w in rest if w.text in ("--multi_gpu", "--multi-gpu", "--gpu_ids"))
            )
    if tool == "deepspeed":
        launch.device_hint = At("gpu", words[i].line)
        launch.spans_nodes = True
        launch.no_ssh = any(w.text in ("--no_ssh", "--no-ssh") for w in rest)
    if tool == "accelerate" and any(w.text.startswith("--mpirun_hostfile") for w in rest):
        launch.spans_nodes = True
    if any(os.path.basename(w.text) in REMOTE_STARTERS for w in words[:i]):
        launch.spans_nodes = True
    for attr, value in values.items():
        setattr(launch, attr, value)
    launch.standalone = any(x.text == "--standalone" for x in rest)
    script = next((x for x in rest if x.text.endswith(".py") and not x.text.startswith("-")), None)
    launch.script = At(script.text, script.line) if script is not None else None
    _script_flags(launch, rest)
    if script is not None:
        after = rest[next(k for k, x in enumerate(rest) if x is script) + 1 :]
        launch.script_nodes, launch.script_world = script_nodes(after), script_world_size(after)
    return launch


AFTER_SCRIPT_FLAGS: dict[str, tuple[str, ...]] = {
    "torchrun": (
        "--nproc-per-node",
        "--nproc_per_node",
        "--nnodes",
        "--node-rank",
        "--node_rank",
        "--rdzv-endpoint",
        "--rdzv_endpoint",
        "--rdzv-backend",
        "--rdzv_backend",
        "--master-addr",
        "--master_addr",
    ),
    "accelerate": (
        "--num_processes",
        "--num-processes",
        "--num_machines",
        "--num-machines",
        "--machine_rank",
        "--machine-rank",
        "--main_process_ip",
        "--main-process-ip",
    ),
    "deepspeed": ("--hostfile", "--num_gpus", "--num-gpus", "--num_nodes", "--num-nodes"),
}
"""The launchers whose parser ends in the script and a REMAINDER of its arguments (torch/distributed/run.py
`training_script_args`, accelerate/commands/launch.py `training_script_args`, deepspeed/launcher/runner.py
`user_args`), and their options that size the world: written after the script, they reach the script and
the launcher runs with its defaults."""


MODULE_FLAGS = ("-m", "--module")
"""torchrun, accelerate launch and deepspeed: run the script argument as a Python module (`-m pkg.train`)."""


def _entry_at(rest: list[Word]) -> int | None:
    """Where the script (a *.py word, or the module after -m / --module) stands among a launcher's words."""
    for k, x in enumerate(rest):
        if x.text.endswith(".py") and not x.text.startswith("-"):
            return k
        if x.text in MODULE_FLAGS and k + 1 < len(rest) and not rest[k + 1].text.startswith("-"):
            return k + 1
    return None


def _after_script(after: list[Word], table: dict[str, str], flags: tuple[str, ...], given: set[str]) -> list[At[str]]:
    """The launcher's world-sizing options written after the script, whose meaning the launcher was not
    given before it (a script's own flag of the same name beside the launcher's is not a mistake)."""
    found: list[At[str]] = []
    for i, w in enumerate(after):
        name, eq, value = w.text.partition("=")
        value = value if eq else (after[i + 1].text if i + 1 < len(after) else "")
        if table.get(name) in LAUNCHER_DEFAULTS and value.strip("'\"") == LAUNCHER_DEFAULTS[table[name]]:
            continue  # what the launcher does by default anyway: the script's own flag, or harmless
        if name in flags and table[name] not in given and all(f.value != name for f in found):
            found.append(At(name, w.line))
    return found


LAUNCHER_DEFAULTS = {"nnodes": "1"}
"""Values that, left to the launcher's default, give the same world: one node (torchrun --nnodes 1,
accelerate --num_machines 1, deepspeed on the local node without a hostfile)."""


SCRIPT_NODE_FLAGS = ("--num_nodes", "--num-nodes", "--trainer.num_nodes", "--trainer.num-nodes")
"""A training script's own node count (PyTorch Lightning's Trainer(num_nodes=...) through argparse or
LightningCLI), which must equal the nodes the job runs on
(https://lightning.ai/docs/pytorch/stable/clouds/cluster_advanced.html)."""


RAY_TRAIN_FLAGS = (("--num-workers", "--num_workers"), ("--use-gpu", "--use_gpu"))
"""Ray Train's examples take ScalingConfig(num_workers=N, use_gpu=True) as --num-workers N --use-gpu: N
workers in all, one GPU each (https://docs.ray.io/en/latest/train/user-guides/using-gpus.html). Both
flags are asked for, so a DataLoader's --num_workers alone is not read as Ray's."""


RAY_CPU_FLAGS = ("--use-cpu", "--use_cpu", "--cpu", "--no-use-gpu", "--no-gpu")


def ray_train_workers(words: list[Word], on_gpu_cluster: bool = False) -> At[int] | None:
    """The Ray Train workers a python script is told to start, in all, when it is told to use GPUs; on a
    Ray cluster of GPU nodes the config starts itself, Ray's own `--num-workers N` alone too (the GPUs were
    asked for to train on), unless a flag says CPU."""
    texts = [w.text.split("=", 1)[0] for w in words]
    if not any(t.endswith(".py") or os.path.basename(t).startswith("python") for t in texts):
        return None
    names: tuple[str, ...] = RAY_TRAIN_FLAGS[0]
    if not any(t in RAY_TRAIN_FLAGS[1] for t in texts):
        if not on_gpu_cluster or any(t in RAY_CPU_FLAGS for t in texts):
            return None
        names = ("--num-workers",)  # a DataLoader's --num_workers is not Ray's
    count = _int_at(next(iter(_flag_values(words, names).values()), None))
    flag = next((w for w, t in zip(words, texts, strict=True) if t in names), None)
    return At(count.value, flag.line) if count is not None and flag is not None else None


WORLD_SIZE_FLAGS = ("--world_size", "--world-size")


def script_world_size(words: list[Word]) -> At[int] | None:
    """The world size a training script is told by its own flag (--world_size N); not with PyTorch's ImageNet
    example's --multiprocessing-distributed, where --world-size counts nodes
    (https://github.com/pytorch/examples/blob/main/imagenet/main.py)."""
    if any(w.text == "--multiprocessing-distributed" for w in words):
        return None
    return _int_at(next(iter(_flag_values(words, WORLD_SIZE_FLAGS).values()), None))


LIGHTNING_DEVICES = ("--trainer.devices", "--devices")
"""PyTorch Lightning's devices per node (LightningCLI's --trainer.devices, Hydra's trainer.devices=): under
srun each task is one rank, so #SBATCH --ntasks-per-node must equal it ("This needs to match
Trainer(devices=...)", https://lightning.ai/docs/pytorch/stable/clouds/cluster_advanced.html)."""


def script_devices(words: list[Word]) -> At[int] | None:
    """A Lightning script's devices per node; a bare --devices only beside Lightning's node count flag."""
    found = _flag_values(words, LIGHTNING_DEVICES)
    if "--devices" in found and "--trainer.devices" not in found and script_nodes(words) is None:
        found.pop("--devices")
    for w in words:
        name, eq, value = w.text.partition("=")
        if eq and name.lstrip("+") == "trainer.devices":
            found[name] = At(value, w.line)
    return next((n for n in (_int_at(v) for v in found.values()) if n is not None), None)


SPAWN_FLAGS = ("--gpus", "-g", "--ngpus", "--gpus_per_node", "--gpus-per-node", "--ngpus_per_node", "--nprocs")
"""A per-node program's count of the processes it spawns itself, one per GPU (torch.multiprocessing.spawn(
nprocs=args.gpus), world_size = nodes x gpus: the widely copied pattern of
https://yangkky.github.io/2019/07/08/distributed-pytorch-tutorial.html)."""


def script_spawns(words: list[Word]) -> At[int] | None:
    """The ranks a program started once per task spawns itself, read only where it states its world size too."""
    if script_world_size(words) is None:
        return None
    return _int_at(next(iter(_flag_values(words, SPAWN_FLAGS).values()), None))


def script_nodes(words: list[Word]) -> At[int] | None:
    """The node count a training script's flags give it (--num_nodes N, trainer.num_nodes=N)."""
    found = _flag_values(words, SCRIPT_NODE_FLAGS)
    for w in words:
        name, eq, value = w.text.partition("=")
        if eq and name.lstrip("+") in ("trainer.num_nodes", "num_nodes"):
            found[name] = At(value, w.line)
    return next((n for n in (_int_at(v) for v in found.values()) if n is not None), None)


def _path_like(value: str) -> bool:
    return "/" in value or value.endswith((".log", ".txt", ".out"))


def script_outputs(words: list[Word]) -> list[At[str]]:
    """Where a training command's flags and overrides say its checkpoints, logs or model are written."""
    found: list[At[str]] = []
    for i, w in enumerate(words):
        name, eq, value = w.text.partition("=")
        nxt = words[i + 1] if i + 1 < len(words) else None
        if name in OUTPUT_OVERRIDES and not eq and nxt is not None:
            found.append(At(nxt.text, nxt.line))
        elif eq and not name.startswith("-") and name.rsplit(".", 1)[-1].lstrip("+") in OUTPUT_KEYS and value:
            found.append(At(value, w.line))
        if name in OUTPUT_FLAGS or name in OUTPUT_FILE_FLAGS:
            given = At(value, w.line) if eq else (At(nxt.text, nxt.line) if nxt is not None else None)
            if given is None or not given.value or given.value.startswith("-"):
                continue
            if name in OUTPUT_FLAGS or _path_like(given.value):
                found.append(given)
    return found


def _script_flags(launch: Launch, rest: list[Word]) -> None:
    """What the training script's own flags say: the backend, DataLoader workers, CPU or GPU."""
    if launch.backend is None:
        backend = _flag_values(rest, BACKEND_FLAGS)
        if backend:
            launch.backend = next(iter(backend.values()))
    launch.outputs += script_outputs(rest)
    for i, w in enumerate(rest):
        name, eq, value = w.text.partition("=")
        after_output = i > 0 and rest[i - 1].text in (*OUTPUT_FLAGS, *OUTPUT_OVERRIDES, *OUTPUT_FILE_FLAGS)
        if name in DATA_FLAGS and eq and value:
            launch.data.append(At(value, w.line))
        elif not w.text.startswith("-") and w.text.startswith("/") and not after_output:
            launch.data += data_paths([At(w.text, w.line)])
    workers = _flag_values(rest, WORKER_FLAGS)
    if workers:
        launch.workers = _int_at(next(iter(workers.values())))
    if launch.device_hint is None:
        for w in rest:
            nxt = rest[rest.index(w) + 1].text if rest.index(w) + 1 < len(rest) else ""
            if (
                w.text in ("--no-cuda", "--no_cuda", "--use_cpu", "--use-cpu", "--cpu")
                or (w.text in ("--device", "--accelerator") and nxt == "cpu")
                or w.text in ("--device=cpu", "--accelerator=cpu")
            ):
                launch.device_hint = At("cpu", w.line)
                break


def _mpirun(words: list[Word], i: int) -> Launch:
    """mpirun / mpiexec / horovodrun as the launcher: -np (ranks in all), -npernode / -N / --map-by
    ppr:N:node (per node), -x NAME[=VALUE] (exported to the ranks), the program and its flags."""
    launch = Launch("mpirun", words[i].line)
    _, launch.srun_nodes, launch.srun_tasks_per_node, launch.srun_gpus = _srun(words, i)
    launch.srun_nodes_what = srun_nodes_what(words, i)
    rest = words[i + 1 :]
    launch.spans_nodes = True
    end = mpi_program(rest)
    j = 0
    while j < end:
        text, nxt = rest[j].text, rest[j + 1] if j + 1 < len(rest) else None
        if text in MPI_TOTAL and nxt is not None:
            launch.total = _int_at(At(nxt.text, nxt.line))
        elif text in MPI_PER_NODE and nxt is not None:
            launch.nproc = At(nxt.text, nxt.line)
        elif text in ("--map-by", "-map-by") and nxt is not None and nxt.text.startswith("ppr:"):
            parts = nxt.text.split(":")
            if len(parts) >= 3 and parts[2].startswith("node"):
                launch.nproc = At(parts[1], nxt.line)
        elif text == "-x" and nxt is not None:
            name, eq, value = nxt.text.partition("=")
            if eq:
                launch.exports[name] = At(value, nxt.line)
        elif text == "--allow-run-as-root":
            launch.as_root = At("mpirun --allow-run-as-root", rest[j].line)
        elif text in MPI_HOSTS and nxt is not None:
            launch.hostfile = At(f"{text} {nxt.text}", nxt.line)
        elif text in ("--oversubscribe", "-oversubscribe") or (
            text in ("--map-by", "-map-by") and nxt is not None and "OVERSUBSCRIBE" in nxt.text.upper()
        ):
            launch.oversubscribe = At(text, rest[j].line)
        j += 1
    program = next(
        (k for k, w in enumerate(rest) if k >= end and w.text.endswith(".py") and not w.text.startswith("-")), None
    )
    if program is not None:
        launch.script = At(rest[program].text, rest[program].line)
        _script_flags(launch, rest[program + 1 :])
        launch.script_nodes = script_nodes(rest[program + 1 :])
    return launch


def mpi_program(rest: list[Word]) -> int:
    """Where the program starts among the words after mpirun: the first word that is neither an option nor an
    option's value. The program's own flags (nccl-tests' `-n 100`, `-f 2`) are not mpirun's."""
    j = 0
    while j < len(rest):
        text = rest[j].text
        if not text.startswith("-"):
            return j
        name, eq, _ = text.partition("=")
        if eq or name in MPI_FLAGS_ALONE:
            j += 1
        else:
            j += 3 if name in MPI_TWO_VALUES else 2
    return len(rest)


def shell_script(words: list[Word], i: int) -> Word | None:
    """The script words[i] runs when it is a shell given one (`bash -c / -xc / -lc / -x -c '...'`), or eval's."""
    base = os.path.basename(words[i].text)
    if base in SHELLS or (base == "env" and i + 1 < len(words) and words[i + 1].text in SHELLS):
        # the first word after the -c option group
        j = i + 1
        while j < len(words) and words[j].text.startswith("-") and not words[j].text.startswith("--"):
            if "c" in words[j].text[1:]:
                return words[j + 1] if j + 1 < len(words) else None
            j += 1
    elif base == "eval" and i + 1 < len(words):
        return Word(" ".join(x.text for x in words[i + 1 :]), words[i + 1].line)
    return None


def training_program(words: list[Word], depth: int = 0) -> At[str] | None:
    """The training program these words run themselves, with no launcher (`python train.py`, `python -m
    pkg.train`, `bash finetune.sh`), looking inside `bash -c '...'` scripts."""
    script = shell_script(words, 0) if words else None
    if script is not None:
        inner = commands(script.text, first_line=script.line) if depth < SCRIPT_DEPTH else []
        return next((p for cmd in inner if (p := training_program(cmd.words, depth + 1)) is not None), None)
    at = program_at(words)
    if at is None or _names_only(words) or not TRAINING_NAME.search(os.path.basename(words[at].text)):
        return None
    return At(" ".join(w.text for w in words[: at + 1]), words[at].line)


def _starts_mpi(words: list[Word], i: int) -> bool:
    """words[i] is mpirun-like and nothing after it is a launcher of its own or a shell script."""
    if os.path.basename(words[i].text) not in MPI_STARTERS:
        return False
    return not any(
        launcher_at(words, j) is not None or os.path.basename(words[j].text) in SHELLS | {"eval"}
        for j in range(i + 1, len(words))
    )


NOT_RUN = {
    "echo",
    "printf",
    "which",
    "type",
    "hash",
    "whereis",
    "alias",
    "grep",
    "egrep",
    "cat",
    "ls",
    "test",
    "[",
    "[[",
    "man",
    "pip",
    "pip3",
    "logger",
    "tee",
    "pkill",
    "pgrep",
    "killall",
    "pidof",
    "sed",
    "awk",
}
"""Commands that name a launcher without running it (`echo torchrun ...`, `which torchrun`, `pkill -f torchrun`
to end one left from an earlier run)."""


def _names_only(words: list[Word]) -> bool:
    first = os.path.basename(words[0].text) if words else ""
    return first in NOT_RUN or (first == "command" and len(words) > 1 and words[1].text in ("-v", "-V"))


def launches(
    words: list[Word],
    depth: int = 0,
    resolve: Callable[[str], str] | None = None,
    functions: Functions | None = None,
) -> list[Launch]:
    """Every distributed launcher started by these words, looking inside `bash -c '...'` and `eval`,
    and into the script's own functions called there (`export -f fn; srun bash -c "fn args"`)."""
    found: list[Launch] = []
    if _names_only(words):
        return found
    for i, w in enumerate(words):
        known = launcher_at(words, i)
        if known is not None:
            found.append(_launch(words, i, *known))
            break
        if _starts_mpi(words, i):
            found.append(_mpirun(words, i))
            break
        script = shell_script(words, i)
        if script is not None and depth < SCRIPT_DEPTH:
            text = resolve(script.text) if resolve else script.text
            script = filled(script, text)
            srun, srun_nodes, srun_tpn, srun_gpus = _srun(words, i)
            submitted = _submitted_nodes(words, i) if not srun else None
            for cmd in commands(text, first_line=script.line):
                inner_words = expand_words(cmd.words, resolve)
                body = (
                    functions.call(inner_words[0].text, [w.text for w in inner_words[1:]])
                    if functions is not None and inner_words
                    else None
                )
                groups = [expand_words(c.words, resolve) for c in body] if body is not None else [inner_words]
                for launch in (x for g in groups for x in launches(g, depth + 1, resolve, functions)):
                    if srun and not launch.under_srun:
                        launch.expanded_before_srun = not script.literal and body is None
                        launch.deferred = script.deferred
                    launch.exports = {**srun_exports(words, i), **launch.exports}
                    launch.under_srun = launch.under_srun or srun
                    if launch.srun_nodes is None and srun_nodes is not None:
                        launch.srun_nodes, launch.srun_nodes_what = srun_nodes, srun_nodes_what(words, i)
                    if launch.srun_nodes is None and submitted is not None:
                        launch.srun_nodes, launch.srun_nodes_what = submitted
                    launch.srun_tasks_per_node = launch.srun_tasks_per_node or srun_tpn
                    launch.srun_tasks = launch.srun_tasks or srun_tasks(words, i)
                    launch.srun_gpus = launch.srun_gpus or srun_gpus
                    found.append(launch)
            break
    return found


def expand_words(words: list[Word], resolve: Callable[[str], str] | None) -> list[Word]:
    """$VAR inside words resolved; a word that is one unquoted expansion of several words is split."""
    if resolve is None:
        return words
    out: list[Word] = []
    for w in words:
        text = resolve(w.text)
        if w.splat is not None and not w.quoted and text != w.text and len(text.split()) > 1:
            out += [filled(Word("", w.line), t) for t in text.split()]
        else:
            out.append(filled(w, text))
    return out


def nnodes_max(launch: Launch) -> int | None:
    if launch.nnodes is None:
        return None
    last = launch.nnodes.value.split(":")[-1]
    return int(last) if last.isdigit() else None


# --- docker / podman run -------------------------------------------------------------

ENGINES = {"docker", "podman", "nvidia-docker"}
BOOL_LONG = {
    "--rm",
    "--detach",
    "--interactive",
    "--tty",
    "--privileged",
    "--init",
    "--read-only",
    "--publish-all",
    "--no-healthcheck",
    "--oom-kill-disable",
    "--disable-content-trust",
    "--quiet",
    "--help",
    "--replace",
    "--rmi",
    "--no-hosts",
    "--env-host",
    "--read-only-tmpfs",
    "--sig-proxy",
    "--use-api-socket",
}
BOOL_SHORT = set("itdPq")


@dataclass
class RunCommand:
    engine: str
    line: int
    options: list[tuple[str, At[str]]] = field(default_factory=list)
    """(option name, value) in order; booleans have the value 'true'."""
    image: At[str] | None = None
    command: list[Word] = field(default_factory=list)

    def values(self, *names: str) -> list[At[str]]:
        return [v for n, v in self.options if n in names]

    def has(self, *names: str) -> At[str] | None:
        found = self.values(*names)
        return found[-1] if found else None


def run_command(words: list[Word]) -> RunCommand | None:
    """`docker run ...` / `podman run ...` / `docker container run ...` -> its options, image, command."""
    if not words or os.path.basename(words[0].text) not in ENGINES:
        return None
    i = 2 if len(words) > 1 and words[1].text == "container" else 1
    if i >= len(words) or words[i].text != "run":
        return None
    run = RunCommand(os.path.basename(words[0].text), words[0].line)
    i = _read_options(words, i + 1, run)
    if i < len(words):
        run.image = At(words[i].text, words[i].line)
        run.command = words[i + 1 :]
    return run


def _read_options(words: list[Word], i: int, run: RunCommand) -> int:
    """The options from words[i] on into run.options; returns the image's index (len(words) when none)."""
    while i < len(words):
        text = words[i].text
        if text == "--":
            return i + 1
        if not text.startswith("-") or text == "-":
            return i
        read = _long_option if text.startswith("--") else _short_options
        i = read(words, i, run) + 1
    return i


def _long_option(words: list[Word], i: int, run: RunCommand) -> int:
    """`--name=value`, a boolean `--name` or `--name value`; returns the index of the last word it took."""
    name, eq, value = words[i].text.partition("=")
    if eq:
        run.options.append((name, At(value, words[i].line)))
    elif name in BOOL_LONG:
        run.options.append((name, At("true", words[i].line)))
    elif i + 1 < len(words):
        run.options.append((name, At(words[i + 1].text, words[i + 1].line)))
        return i + 1
    return i


def _short_options(words: list[Word], i: int, run: RunCommand) -> int:
    """`-it`, `-v/data:/data` or `-itv /data:/data` (booleans, then one flag taking the next word);
    returns the index of the last word it took."""
    flags, line = words[i].text[1:], words[i].line
    if all(c in BOOL_SHORT for c in flags):
        run.options += [(f"-{c}", At("true", line)) for c in flags]
    elif len(flags) > 1 and flags[0] not in BOOL_SHORT:  # -v/data:/data style
        run.options.append((f"-{flags[0]}", At(flags[1:], line)))
    elif i + 1 < len(words):
        run.options.append((f"-{flags[-1]}", At(words[i + 1].text, words[i + 1].line)))
        run.options += [(f"-{c}", At("true", line)) for c in flags[:-1]]
        return i + 1
    return i
