"""SARIF 2.1.0 for code-scanning UIs (GitHub, GitLab, VS Code): one run, one result per finding.

A pure function of the Report: rules are the distinct result ids, levels come from the
lint severity (error / warning / info -> error / warning / note), locations from evidence.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import TypedDict
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


# The parts of SARIF 2.1.0 this renderer writes (names as the schema spells them).
class Text(TypedDict):
    text: str


class Level(TypedDict):
    level: str


class Region(TypedDict, total=False):
    startLine: int
    snippet: Text


class ArtifactLocation(TypedDict):
    uri: str


class PhysicalLocation(TypedDict, total=False):
    artifactLocation: ArtifactLocation
    region: Region


class Location(TypedDict):
    physicalLocation: PhysicalLocation


class Rule(TypedDict, total=False):
    id: str
    name: str
    shortDescription: Text
    defaultConfiguration: Level
    fullDescription: Text
    help: Text
    helpUri: str


class SarifResult(TypedDict, total=False):
    ruleId: str
    ruleIndex: int
    level: str
    message: Text
    locations: list[Location]


class Notification(TypedDict, total=False):
    level: str
    message: Text
    locations: list[Location]


class Invocation(TypedDict):
    executionSuccessful: bool
    toolExecutionNotifications: list[Notification]


class Driver(TypedDict):
    name: str
    version: str
    rules: list[Rule]


class Tool(TypedDict):
    driver: Driver


class Run(TypedDict):
    tool: Tool
    invocations: list[Invocation]
    results: list[SarifResult]


SarifLog = TypedDict("SarifLog", {"$schema": str, "version": str, "runs": list[Run]})


def _level(r: Result) -> str:
    severity = r.observed.get("severity")
    return LEVEL.get(str(severity), STATUS_LEVEL[r.status])


def _rule(r: Result) -> Rule:
    rule = Rule(
        id=r.id,
        name="".join(p.capitalize() for p in r.id.replace(".", "_").split("_")),
        shortDescription=Text(text=r.title),
        defaultConfiguration=Level(level=_level(r)),
    )
    if r.cause:
        rule["fullDescription"] = Text(text=r.cause)
    if r.remedy:
        rule["help"] = Text(text=r.remedy)
    source = r.expected.get("source")
    if isinstance(source, str) and source.startswith("http"):
        rule["helpUri"] = source
    return rule


def _uri(path: str) -> str:
    """A URI reference: file:// for absolute paths, percent-encoded relative ones (code scanning wants those)."""
    if path.startswith("/"):
        return PurePosixPath(path).as_uri()
    return quote(path.replace("\\", "/"))


def _location(r: Result) -> list[Location]:
    for e in r.evidence:
        physical = PhysicalLocation(artifactLocation=ArtifactLocation(uri=_uri(e.source)))
        if e.line is not None and e.line >= 1:
            physical["region"] = Region(startLine=e.line)
            if e.text:
                physical["region"]["snippet"] = Text(text=e.text)
        return [Location(physicalLocation=physical)]
    return []


def to_sarif(report: Report) -> SarifLog:
    findings = [r for r in report.results if r.status is not Status.SKIP and r.id != "lint.input.unreadable"]
    rules: dict[str, Rule] = {}
    for r in findings:
        rules.setdefault(r.id, _rule(r))
    index = {rule_id: i for i, rule_id in enumerate(rules)}
    results = []
    for r in findings:
        result = SarifResult(
            ruleId=r.id,
            ruleIndex=index[r.id],
            level=_level(r),
            message=Text(text=r.summary + (f" Fix: {r.remedy}" if r.remedy else "")),
        )
        locations = _location(r)
        if locations:
            result["locations"] = locations
        results.append(result)
    problems = [r for r in report.results if r.id == "lint.input.unreadable" or r.status is Status.SKIP]
    invocation = Invocation(
        executionSuccessful=not any(r.status is Status.ERROR for r in problems),
        toolExecutionNotifications=[_notification(r) for r in problems],
    )
    driver = Driver(
        name=report.tool.get("name", "ddp-doctor"), version=report.tool.get("version", ""), rules=list(rules.values())
    )
    run = Run(tool=Tool(driver=driver), invocations=[invocation], results=results)
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def _notification(r: Result) -> Notification:
    note = Notification(level="error" if r.status is Status.ERROR else "note", message=Text(text=r.summary))
    locations = _location(r)
    if locations:
        note["locations"] = locations
    return note


def render(report: Report, color: bool = False) -> str:
    return json.dumps(to_sarif(report), indent=2) + "\n"
