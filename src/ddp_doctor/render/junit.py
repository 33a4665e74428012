"""JUnit XML: each Result is a testcase named by its stable id, so CI dashboards track it."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ddp_doctor.render.labels import where
from ddp_doctor.report import Report, Result, Status


def _body(r: Result) -> str:
    parts = [r.summary]
    if where(r):
        parts.append(f"where: {where(r)}")
    if r.cause:
        parts.append(f"cause: {r.cause}")
    if r.remedy:
        parts.append(f"remedy: {r.remedy}")
    parts += [f"{e.source}:{e.line if e.line is not None else '-'}: {e.text}" for e in r.evidence]
    return "\n".join(parts)


def render(report: Report, color: bool = False) -> str:
    tally = {s: sum(1 for r in report.results if r.status is s) for s in Status}
    suites = ET.Element("testsuites", name="ddp-doctor")
    suite = ET.SubElement(
        suites,
        "testsuite",
        {
            "name": f"ddp-doctor {report.command}",
            "tests": str(len(report.results)),
            "failures": str(tally[Status.FAIL]),
            "errors": str(tally[Status.ERROR]),
            "skipped": str(tally[Status.SKIP]),
            "time": f"{report.duration_s:.3f}",
            "timestamp": report.started,
            "hostname": str(report.target.get("host", "")),
        },
    )
    for r in report.results:
        name = r.id if r.rank is None else f"{r.id}[rank{r.rank}]"
        case = ET.SubElement(
            suite,
            "testcase",
            {
                "classname": r.id.split(".")[0],
                "name": name,
                "time": f"{r.duration_s or 0.0:.3f}",
            },
        )
        tag = {Status.FAIL: "failure", Status.ERROR: "error", Status.SKIP: "skipped"}.get(r.status)
        if tag:
            el = ET.SubElement(case, tag, message=r.summary)
            if tag != "skipped":
                el.text = _body(r)
        elif r.status in (Status.WARN, Status.INFO):
            ET.SubElement(case, "system-out").text = f"{r.status.value.upper()}: " + _body(r)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
