"""An image's Entrypoint, Cmd and WorkingDir: what a container of it starts by default."""

from __future__ import annotations

import json

from ddp_doctor.checks.facts.image_only import ImageConfigFacts
from ddp_doctor.checks.model import Check, Finding, skip
from ddp_doctor.report import Status


def _instruction(name: str, value: object) -> str:
    """An image config's Entrypoint / Cmd as its Dockerfile instruction reads: CMD ["/hello"], or 'no CMD'."""
    if not value:
        return f"no {name}"
    return f"{name} {json.dumps(value)}" if isinstance(value, list) else f"{name} {value}"


def judge(f: ImageConfigFacts) -> Finding:
    """Shows the image's ENTRYPOINT, CMD and WORKDIR as its Dockerfile would read them (a SKIP for a
    rootfs, which has no config).

    Why: an ENTRYPOINT receives the run command as its arguments, so `docker run IMAGE torchrun ...`
    starts the entrypoint, not torchrun; the run command `image` advises clears it.
    """
    if not f.present:
        return skip("a rootfs has no Entrypoint/Cmd")
    return Finding(
        Status.PASS,
        f"{_instruction('ENTRYPOINT', f.entrypoint)}; {_instruction('CMD', f.cmd)}; WORKDIR {f.working_dir or '/'}",
        observed={
            "Entrypoint": f.entrypoint,
            "Cmd": f.cmd,
            "WorkingDir": f.working_dir,
            "Labels": dict(f.labels),
        },
    )


CHECK = Check(
    name="entrypoint",
    title="Entrypoint and command",
    facts=ImageConfigFacts,
    judge=judge,
    ids={"image": "image.entrypoint"},
    order=300,
)
