from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from ddp_doctor.render import FORMATS, render
from ddp_doctor.report import Evidence, Report, Result, Status


@pytest.fixture
def report() -> Report:
    r = Report.for_host("check")
    r.add(Result("env.python", "Python", Status.PASS, "Python 3.11"))
    r.add(
        Result(
            "env.shm",
            "/dev/shm",
            Status.FAIL,
            "64 MiB < 256 MiB <&>",
            cause="Docker default",
            remedy="docker run --shm-size=8g",
        )
    )
    r.add(Result("env.user", "user", Status.WARN, "root"))
    r.add(Result("env.gpu", "GPUs", Status.SKIP, "no NVIDIA driver"))
    r.add(
        Result(
            "live.init",
            "init",
            Status.ERROR,
            "probe broke",
            rank=1,
            phase="init",
            evidence=[Evidence("rank-1.log", "x", 2)],
        )
    )
    r.root_cause = "env.shm"
    return r


def test_text_has_words_not_only_colour_and_shows_remedy(report: Report) -> None:
    out = render(report, "text", color=False)
    assert "\x1b[" not in out
    for word in (
        "PASS",
        "FAIL",
        "WARN",
        "SKIP",
        "ERROR",
        "verdict: FAIL",
        "docker run --shm-size=8g",
        "root cause: env.shm — /dev/shm: 64 MiB < 256 MiB",
    ):
        assert word in out
    assert "rank 1" in out


def test_text_colour_on_request(report: Report) -> None:
    assert "\x1b[" in render(report, "text", color=True)


def test_junit_maps_statuses(report: Report) -> None:
    root = ET.fromstring(render(report, "junit"))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "5",
        "1",
        "1",
        "1",
    )
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["env.shm"].find("failure") is not None
    assert cases["live.init[rank1]"].find("error") is not None
    assert cases["env.gpu"].find("skipped") is not None
    assert cases["env.python"].find("failure") is None


def test_markdown_and_html_escape_and_show_every_result(report: Report) -> None:
    md = render(report, "markdown")
    assert "**FAIL**" in md and "`env.user`" in md and "docker run --shm-size=8g" in md
    html = render(report, "html")
    assert "&lt;&amp;&gt;" in html and "<&>" not in html
    assert html.count("<tr>") == 6


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders(report: Report, fmt: str) -> None:
    out = render(report, fmt)
    assert "env.shm" in out


def test_json_is_the_contract(report: Report) -> None:
    d = json.loads(render(report, "json"))
    assert set(d) >= {
        "schema_version",
        "tool",
        "command",
        "target",
        "started",
        "duration_s",
        "verdict",
        "root_cause",
        "facts",
        "results",
    }
    assert set(d["results"][1]) >= {
        "id",
        "title",
        "status",
        "summary",
        "cause",
        "remedy",
        "observed",
        "expected",
        "metrics",
        "rank",
        "node",
        "phase",
        "evidence",
        "duration_s",
    }
