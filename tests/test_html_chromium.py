"""The HTML report as a browser lays it out, measured in a real headless Chromium at two widths:
status cells on one line, time-axis labels distinct and not overlapping, the phases coloured and
the legend in the chain's order, nothing wider than the window; a screenshot at each width shows the
phase colours."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DOCTOR, FIXTURES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTHS = (1280, 560)
CHECK = FIXTURES / "screen" / "check-cpu.json"
RUN = FIXTURES / "screen" / "run-raise.json"
PHASES = ["init", "collectives", "dataloader", "sampler", "ddp", "balance"]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (installed by .ci/run)"),
]

# Runs at the end of the page (it is parsed by then; asking for a box lays the page out) and leaves
# what it measured in the DOM that --dump-dom prints.
MEASURE = """<script>
(() => {
  const lines = el => {
    const r = document.createRange(); r.selectNodeContents(el);
    return new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top))).size;
  };
  const box = el => { const b = el.getBoundingClientRect(); return [b.left, b.right]; };
  const m = {
    status_lines: [...document.querySelectorAll('tr > td:first-child')].map(lines),
    axes: [...document.querySelectorAll('svg')].map(s => [...s.querySelectorAll('text.tick')]
      .map(t => [t.textContent, ...box(t)])),
    legend: [...document.querySelectorAll('.legend .phase')]
      .map(e => [e.textContent, getComputedStyle(e.querySelector('.swatch')).backgroundColor]),
    overflow: document.documentElement.scrollWidth - window.innerWidth,
  };
  const out = document.createElement('pre'); out.id = 'measured'; out.textContent = JSON.stringify(m);
  document.body.appendChild(out);
})();
</script>"""


def _page(tmp: Path, report: Path) -> Path:
    """The page as `ddp-doctor render --format html` writes it, with the measuring script appended."""
    html = tmp / f"{report.stem}.html"
    done = subprocess.run(
        [str(DOCTOR), "render", str(report), "--format", "html", "-o", str(html)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    page = tmp / f"{report.stem}-measured.html"
    page.write_text(html.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    return page


def _chromium(page: Path, width: int, *what: str) -> str:
    assert CHROMIUM is not None
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},1400",
        f"--user-data-dir={page.parent / f'profile-{width}'}",
        *what,
        page.as_uri(),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout


def _measure(page: Path, width: int) -> dict[str, Any]:
    dom = _chromium(page, width, "--dump-dom")
    start = dom.index('<pre id="measured">') + len('<pre id="measured">')
    return dict(json.loads(dom[start : dom.index("</pre>", start)].replace("&amp;", "&").replace("&quot;", '"')))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("report", [CHECK, RUN], ids=["check", "run"])
def test_the_page_is_laid_out_right(tmp_path: Path, report: Path, width: int) -> None:
    m = _measure(_page(tmp_path, report), width)
    assert m["status_lines"] and set(m["status_lines"]) == {1}, m["status_lines"]  # '✔ PASS' never wraps
    assert m["overflow"] <= 0, m["overflow"]  # no sideways scrolling, charts included
    assert m["axes"]
    for axis in m["axes"]:
        labels = [label for label, _, _ in axis]
        assert len(labels) >= 3 and len(set(labels)) == len(labels), labels
        boxes = sorted((left, right) for _, left, right in axis)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(boxes)), axis  # labels do not overlap
    if report is CHECK:
        assert [name for name, _ in m["legend"]] == PHASES  # the chain's order, not the alphabet's
        assert len({colour for _, colour in m["legend"]}) == len(PHASES)


def test_screenshots_show_each_phase_in_its_colour(tmp_path: Path) -> None:
    from PIL import Image

    page = _page(tmp_path, CHECK)
    legend = _measure(page, WIDTHS[0])["legend"]
    wanted = {tuple(int(c) for c in colour.removeprefix("rgb(").rstrip(")").split(", ")) for _, colour in legend}
    for width in WIDTHS:
        shot = tmp_path / f"check-{width}.png"
        _chromium(page, width, f"--screenshot={shot}")
        image = Image.open(shot).convert("RGB")
        assert image.size[0] == width
        seen = {colour for _, colour in image.getcolors(maxcolors=1 << 20) or []}
        assert wanted <= seen, (width, wanted - seen)  # every legend swatch is painted
