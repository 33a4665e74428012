"""SARIF 2.1.0 for code-scanning UIs (GitHub, GitLab, VS Code): one run, one result per finding.

A pure function of the Report: rules are the distinct result ids, levels come from the
lint severity (error / warning / info -> error / warning / note), locations from evidence.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from ddp_doctor.report import Report, Result, Status

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVEL = {"error": "error", "warning": "warning", "info": "note"}
STATUS_LEVEL = {
    Status.FAIL: "error",
    Status.ERROR: "error",
    Status.WARN: "warning",
    Status.PASS: "note",
    Status.INFO: "note",
    Status.SKIP: "none",
}


def _level(r: Result) -> str:
    severity = r.observed.get("severity")
    return LEVEL.get(str(severity), STATUS_LEVEL[r.status])


def _rule(r: Result) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "id": r.id,
        "name": "".join(p.capitalize() for p in r.id.replace(".", "_").split("_")),
        "shortDescription": {"text": r.title},
        "defaultConfiguration": {"level": _level(r)},
    }
    if r.cause:
        rule["fullDescription"] = {"text": r.cause}
    if r.remedy:
        rule["help"] = {"text": r.remedy}
    source = r.expected.get("source")
    if isinstance(source, str) and source.startswith("http"):
        rule["helpUri"] = source
    return rule


def _uri(path: str) -> str:
    """A URI reference: file:// for absolute paths, percent-encoded relative ones (code scanning wants those)."""
    if path.startswith("/"):
        return PurePosixPath(path).as_uri()
    return quote(path.replace("\\", "/"))


def _location(r: Result) -> list[dict[str, Any]]:
    for e in r.evidence:
        physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(e.source)}}
        if e.line is not None and e.line >= 1:
            physical["region"] = {"startLine": e.line}
            if e.text:
                physical["region"]["snippet"] = {"text": e.text}
        return [{"physicalLocation": physical}]
    return []


def to_sarif(report: Report) -> dict[str, Any]:
    findings = [r for r in report.results if r.status is not Status.SKIP and r.id != "lint.input.unreadable"]
    rules: dict[str, dict[str, Any]] = {}
    for r in findings:
        rules.setdefault(r.id, _rule(r))
    index = {rule_id: i for i, rule_id in enumerate(rules)}
    results = []
    for r in findings:
        result: dict[str, Any] = {
            "ruleId": r.id,
            "ruleIndex": index[r.id],
            "level": _level(r),
            "message": {"text": r.summary + (f" Fix: {r.remedy}" if r.remedy else "")},
        }
        locations = _location(r)
        if locations:
            result["locations"] = locations
        results.append(result)
    problems = [r for r in report.results if r.id == "lint.input.unreadable" or r.status is Status.SKIP]
    notifications = [
        {
            "level": "error" if r.status is Status.ERROR else "note",
            "message": {"text": r.summary},
            **({"locations": _location(r)} if _location(r) else {}),
        }
        for r in problems
    ]
    invocation = {
        "executionSuccessful": not any(r.status is Status.ERROR for r in problems),
        "toolExecutionNotifications": notifications,
    }
    run = {
        "tool": {
            "driver": {
                "name": report.tool.get("name", "ddp-doctor"),
                "version": report.tool.get("version", ""),
                "rules": list(rules.values()),
            }
        },
        "invocations": [invocation],
        "results": results,
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def render(report: Report, color: bool = False) -> str:
    return json.dumps(to_sarif(report), indent=2) + "\n"
