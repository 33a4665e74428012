"""Reports of every command, produced by the real CLI and recorded on the GPU node, validate against
docs/report.schema.json, the machine-checkable form of docs/report-schema.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ddp_doctor.report import Report, Result, Status
from tests.conftest import FIXTURES, run_cli

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "report.schema.json").read_text())
RECORDED = sorted(p for p in (FIXTURES / "gpu").rglob("*.json") if '"schema_version"' in p.read_text()[:4000])


def _validate(report: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(report, SCHEMA, cls=jsonschema.Draft202012Validator)


def _json(*args: str) -> dict[str, Any]:
    proc = run_cli(*args, "--format", "json", timeout=240)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_check_static_report_matches_the_schema() -> None:
    report = _json("check", "--static")
    _validate(report)
    assert {"python", "torch", "shm", "user"} <= set(report["facts"])


def test_explain_lint_and_image_reports_match_the_schema(tmp_path: Path) -> None:
    from tests.image import imgbuild

    _validate(_json("explain", str(FIXTURES / "logs" / "cpu-shm-64mb.log")))
    compose = tmp_path / "compose.yaml"
    compose.write_text("services:\n  t:\n    image: x\n    command: [torchrun, --nproc-per-node=2, t.py]\n")
    _validate(_json("lint", str(compose)))
    _validate(_json("image", str(imgbuild.torch_rootfs(tmp_path / "rootfs"))))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_recorded_gpu_reports_match_the_schema(path: Path) -> None:
    _validate(json.loads(path.read_text()))


def test_the_schema_rejects_what_the_contract_forbids() -> None:
    good = Report(command="check", target={"host": "h"}, results=[Result("env.shm", "t", Status.PASS, "s")]).to_dict()
    _validate(good)
    for broken in (
        {**good, "schema_version": 2},
        {**good, "verdict": "ok"},
        {**good, "results": [{**good["results"][0], "status": "passed"}]},
        {**good, "results": [{**good["results"][0], "metrics": {"shm": "big"}}]},
        {k: v for k, v in good.items() if k != "results"},
        {**good, "facts": {"torch": {"installed": "yes"}}},  # check's facts sections have a shape
    ):
        with pytest.raises(jsonschema.ValidationError):
            _validate(broken)
