"""The text report fits the terminal it is shown in: run in a real tmux at 80, 100 and 160 columns,
no line is wider than the pane (the terminal never had to wrap one), none ends in spaces, and the
words are the same words at every width (nothing was broken mid-word). Piped, it is laid out for
100 columns."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import DOCTOR, FIXTURES

# Reports with long commands, paths, log quotes, remedies with their own lines, and rank rows.
REPORTS = [FIXTURES / "gpu" / "live" / "report.json", FIXTURES / "gpu" / "run" / "stuck.json"]
LOG = FIXTURES / "logs" / "cpu-sigkill-rank.log"
DONE = "__screen_done__"
pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


def _commands() -> list[list[str]]:
    return [*(["render", str(r)] for r in REPORTS), ["render", "-v", str(REPORTS[0])], ["explain", str(LOG)]]


def _in_tmux(tmp: Path, columns: int, argv: list[str]) -> list[str]:
    """The lines `ddp-doctor ARGV` leaves on a tmux pane `columns` wide, wrapped lines joined (-J)."""
    socket, conf = tmp / f"tmux-{columns}", tmp / "tmux.conf"
    conf.write_text("set -g history-limit 50000\nset -g remain-on-exit on\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "TMUX")}
    script = f"{DOCTOR} {' '.join(argv)}; echo {DONE}"
    tmux = ["tmux", "-S", str(socket), "-f", str(conf)]
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", str(columns), "-y", "50", "sh", "-c", script],
        env=env,
        check=True,
        timeout=30,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            shown = subprocess.run(
                [*tmux, "capture-pane", "-p", "-J", "-S", "-", "-E", "-"],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout
            if DONE in shown:
                break
            assert time.monotonic() < deadline, f"no {DONE} after 90 s: {shown[-500:]}"
            time.sleep(0.2)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True, timeout=30, check=False)
    lines = shown.split("\n")
    return lines[: next(i for i, line in enumerate(lines) if DONE in line)]


def _words(lines: list[str]) -> list[str]:
    """The report's words in order, leaving out the table's header (it names the summary column only
    when there is one)."""
    kept = "\n".join(line for line in lines if not line.startswith("status  check"))
    # The header's elapsed time ("1 warning; 0.2 s)") is the one word two runs of one command may not share.
    return re.sub(r";\s+\d+(?:\.\d+)?\s+s\)", "; N s)", kept).split()


def _same_words(shown: list[str], reference: list[str], columns: int) -> None:
    """`shown` holds the same characters as `reference` in the same order, and a word is cut only where
    it is longer than a line can hold (a path of 73 characters on an 80-column screen)."""
    assert "".join(shown) == "".join(reference), columns
    known = set(reference)
    for i, word in enumerate(shown):
        if word not in known:
            cut = len(word) >= columns - 12 or (i > 0 and len(shown[i - 1]) >= columns - 12)
            assert cut, (columns, shown[max(0, i - 3) : i + 3])


def _wide(argv: list[str]) -> list[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "250"}
    done = subprocess.run([str(DOCTOR), *argv], capture_output=True, text=True, timeout=60, check=False, env=env)
    return _words(done.stdout.splitlines())


@pytest.mark.parametrize("argv", _commands(), ids=lambda a: " ".join([a[0], *(Path(x).name for x in a[1:])]))
def test_the_report_fits_tmux_at_80_100_and_160_columns(tmp_path: Path, argv: list[str]) -> None:
    piped = subprocess.run(
        [str(DOCTOR), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert piped.returncode in (0, 1), piped.stderr
    piped_lines = piped.stdout.rstrip("\n").split("\n")
    assert max(len(line) for line in piped_lines) <= 100 and not [x for x in piped_lines if x != x.rstrip()]
    reference = _wide(argv)
    _same_words(_words(piped_lines), reference, 100)
    widest = {}
    for columns in (80, 100, 160):
        lines = _in_tmux(tmp_path, columns, argv)
        too_wide = [line for line in lines if len(line) > columns]
        assert not too_wide, (columns, too_wide[:3])  # -J joins what the terminal wrapped: none was
        assert not [line for line in lines if line != line.rstrip()], columns
        _same_words(_words(lines), reference, columns)  # no word broken or lost at any width
        widest[columns] = max(len(line) for line in lines)
    assert widest[160] > 100 >= widest[100] and widest[80] <= 80  # the terminal's width is used, not a fixed one


def test_piped_output_is_100_columns_and_columns_overrides_it() -> None:
    report = str(REPORTS[1])
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("COLUMNS", None)
    piped = subprocess.run(
        [str(DOCTOR), "render", report], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert 90 < max(len(line) for line in piped.stdout.splitlines()) <= 100
    env["COLUMNS"] = "72"
    narrow = subprocess.run(
        [str(DOCTOR), "render", report], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 72
    _same_words(_words(narrow.stdout.splitlines()), _words(piped.stdout.splitlines()), 72)
