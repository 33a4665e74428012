"""--plot writes a real PNG / SVG (matplotlib is in the dev extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddp_doctor.bench import plot
from ddp_doctor.errors import DoctorError
from tests.conftest import FIXTURES, run_cli

H100 = str(FIXTURES / "bench" / "h100_16rank_all_reduce_perf.log")
P4D = str(FIXTURES / "bench" / "p4d_16rank_efa_all_reduce_perf_mpirun_prefixed.log")


def test_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "busbw.png"
    proc = run_cli("bench", "--import", H100, "--baseline", P4D, "--plot", str(out), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert not list(tmp_path.glob(".ddp-doctor-plot-*"))


def test_svg_has_the_series(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "busbw.svg"
    proc = run_cli("bench", "--import", H100, "--plot", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "<svg" in text and "all_reduce fp32 in-place" in text


def test_wrong_suffix_exit_2(tmp_path: Path) -> None:
    proc = run_cli("bench", "--import", H100, "--plot", str(tmp_path / "busbw.jpg"))
    assert proc.returncode == 2 and ".png or .svg" in proc.stderr
    assert not (tmp_path / "busbw.jpg").exists()


@pytest.mark.parametrize("error", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_a_draw_that_is_interrupted_or_fails_leaves_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException
) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def broken(self: Figure, fname: str, **_: object) -> None:
        Path(fname).write_bytes(b"half a plot")
        raise error

    monkeypatch.setattr(Figure, "savefig", broken)
    out = tmp_path / "busbw.png"
    with pytest.raises(KeyboardInterrupt if error is KeyboardInterrupt else DoctorError):
        plot.write(str(out), [])
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a temp file or a half plot was left"
