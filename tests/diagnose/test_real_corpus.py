"""Logs users pasted into public issue threads: explain names the cause each thread confirmed (fitted part).

tests/fixtures/logs/real/LABELS.yaml holds, per log, its source thread and the conclusion the thread
reached (labels come from the threads, never from explain's output); README.md lists them by class.
Only the fitted part is asserted here. The blind part is scored, never fitted to, by
benchmarks/score_explain_corpus.py; the rule that splits them is in README.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_doctor.cli import main
from ddp_doctor.diagnose import explain_text
from ddp_doctor.report import Status
from tests.fixtures.logs.real import corpus

LABELS = corpus.load()
FITTED = sorted(n for n, label in LABELS.items() if corpus.part(n, label) == "fitted")

AWAITING_KNOWLEDGE: frozenset[str] = frozenset(
    {
        # apex's master on an older torch (torch.distributed lacks what apex aliases): a FAIL, the mismatch not named
        "apex-1532.log",
        "axolotl-494.log",
        "bottom-up-attention.pytorch-98.log",  # the same class, a two-line paste
        "colossalai-104.log",
        "cudf-spark-7632.log",  # UCX cannot create a completion queue in a container (memlock limit): a WARN
        "examples-611.log",
        # an MoE expert-parallel size the world cannot divide: a FAIL (AssertionError while wrapping), not the cause
        "fambench-103.log",
        "jobset-603.log",
        # a launcher's own pre-flight check that fires wrongly (Lightning ddp_notebook, fixed in a later release)
        "lightning-21402.log",
        # a framework's own argument check firing wrongly (Megatron-LM's TP => sequence-parallel check outside MoE)
        "megatron-lm-85.log",
        "myria3d-123.log",  # NCCL_BLOCKING_WAIT turning a long rank-0 data preparation into a timeout under Slurm
        "nccl-1176.log",  # an NCCL release's intermittent bootstrap failure, fixed by another version
        "nccl-tests-115.log",  # nccl-tests stopping after its init lines (peer-to-peer behind the IOMMU): a WARN
        "nccl-tests-218.log",
        "open-llama-47.log",  # ranks waiting at a store barrier for one held up by its experiment logger (wandb)
        "open-r1-249.log",  # a trainer's batch arithmetic across processes (GRPO generations per prompt)
        "openrlhf-208.log",  # a stale torch_extensions build lock left by an interrupted build (hang)
        "pseco-15.log",
        "rccl-1129.log",  # nccl-tests stopping after its device list (peer-to-peer behind the IOMMU): a WARN
        "nccl-257.log",  # nccl-tests stopping in communicator set-up, as a cut paste of a healthy run does: a WARN
        # nccl-tests built without MPI shown only by two test summaries (and NCCL's ranks per host): a WARN
        "nccl-tests-27.log",
        "nccl-tests-182.log",
        "ray-30333.log",  # NCCL_SOCKET_IFNAME not matching the node's interface under Ray: a FAIL, cause not named
        "pyllama-25.log",
        "pytorch-177472.log",
        # a Ray Train job asking for more GPU workers than GPUs: its two start-up lines and nothing after, a WARN
        "ray-23395.log",
        # a script's own init line and nothing after it: a hang at init (a stale file:// rendezvous file) or a paste
        # that ends there, so a WARN naming the stale file among its hypotheses
        "tacotron2-64.log",
        "transformers-17106.log",  # a timeout while one rank preprocesses data, torchrun's failure table only
        "ucx-7239.log",
        "ucx-8229.log",  # UCX short of locked memory for an IB device: a WARN naming memlock (runs that go on print it too)
        # an NCCL system error whose cause (NCCL_BUFFSIZE too large for memory registration) the log does not show
        "vllm-19613.log",
        # Horovod's shutdown message, a consequence: the real error (CUDA OOM) came earlier, above the paste
        "uniter-31.log",
        # a multi-GPU run started with plain python (no launcher), the model spread over the GPUs: the launcher not named
        "llamafactory-140.log",
        # a Lightning GPU selection with gaps failing at its first barrier: only the generic NCCL system error named
        "lightning-8139.log",
        # a model loaded with low_cpu_mem_usage under ZeRO-3: transformers' refusal comes back, not the thread's cause
        # (the project's loader passing the option, which ZeRO-3 does not need since it partitions the weights itself)
        "llamafactory-199.log",
        "lmflow-686.log",
        # DeepSpeed's init lines and nothing after: a WARN naming the hang at init, not a FAIL
        "online-rlhf-11.log",
    }
)
"""Fitted logs whose class of failure explain does not know yet (strict xfail: a fix makes the test say so)."""


def test_the_readme_lists_every_log_with_its_source() -> None:
    readme = (corpus.HERE / "README.md").read_text(encoding="utf-8")
    for name, label in LABELS.items():
        assert name in readme and str(label["source"]) in readme, name


@pytest.mark.parametrize("name", sorted(corpus.FIRST))
def test_the_first_logs_name_the_thread_s_cause_first(name: str) -> None:
    label = LABELS[name]
    results = explain_text((corpus.HERE / name).read_bytes(), "log")
    failing = [r for r in results if r.status is Status.FAIL]
    want = label["root_cause"]
    if want is None:  # a healthy run: no failure, and no "unknown" warning for its worrying-looking lines
        assert not failing, [r.id for r in results]
        assert "diag.unknown" not in {r.id for r in results}
        return
    assert failing and failing[0].id == want, [(r.id, r.summary[:120]) for r in results]
    root = failing[0]
    if "signal" in label:
        assert root.observed["signal"].startswith(str(label["signal"]))
    if "library" in label:
        assert root.observed["library"] == label["library"]


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="class not known yet"))
        if n in AWAITING_KNOWLEDGE
        else n
        for n in FITTED
    ],
)
def test_explain_is_right_on_the_fitted_part(name: str, tmp_path: Path) -> None:
    """The judge of benchmarks/score_explain_corpus.py, on the real command's JSON, the file name blanked."""
    log = tmp_path / "log"
    log.write_bytes((corpus.HERE / name).read_bytes())
    out = tmp_path / "report.json"
    assert main(["explain", "--format", "json", "--quiet", "--output", str(out), str(log)]) in (0, 1)
    verdict = corpus.judge(LABELS[name], corpus.answer(json.loads(out.read_text())))
    assert verdict.right, verdict.why


def test_awaiting_knowledge_lists_fitted_logs_only() -> None:
    assert AWAITING_KNOWLEDGE <= set(FITTED)
