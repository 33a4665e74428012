"""Is numpy importable beside torch (torch.distributed's *_object collectives need it)?"""

from __future__ import annotations

from ddp_doctor.checks.facts.software import TorchFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status


def judge(f: TorchFacts) -> Finding:
    """Warns when numpy does not import beside torch.

    Why: torch does not require numpy, so slim images often lack it, but
    all_gather_object / gather_object / broadcast_object_list turn bytes back through
    tensor.numpy() and raise 'Numpy is not available'. Plain tensor collectives and DDP work.
    """
    if not f.usable or not f.numpy_probed:
        return skip("not probed (torch did not import here)")
    if f.numpy:
        return Finding(Status.PASS, f"numpy {f.numpy} imports beside torch {f.version}", observed={"numpy": f.numpy})
    return Finding(
        Status.WARN,
        "numpy is not importable; torch.distributed.all_gather_object / gather_object / broadcast_object_list "
        "will raise 'Numpy is not available' (plain tensor collectives and DDP work)",
        cause="torch does not require numpy, so slim images often lack it, but torch.distributed's *_object "
        "collectives turn bytes back through tensor.numpy()",
        remedy=f"{f.install.python} -m pip install numpy   (Dockerfile: RUN pip install numpy)",
        observed={"numpy": None},
        expected={"numpy": "importable"},
    )


CHECK = Check(
    name="numpy",
    title="numpy beside torch",
    facts=TorchFacts,
    judge=judge,
    ids={"env": "env.numpy"},
    order=50,
    tags=frozenset({"environment"}),
)
