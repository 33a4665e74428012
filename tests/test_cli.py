from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ddp_doctor import __version__
from ddp_doctor.cli import COMMANDS, main
from tests.conftest import run_cli


def test_version_and_help_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert __version__ in capsys.readouterr().out
    for name in COMMANDS:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0, name
        assert "usage: ddp-doctor " + name in capsys.readouterr().out


def test_unknown_flag_is_one_line_and_exit_2() -> None:
    proc = run_cli("check", "--no-such-flag")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "--no-such-flag" in proc.stderr and "Traceback" not in proc.stderr


def test_render_round_trip_and_bad_input(tmp_path: Path) -> None:
    saved = tmp_path / "r.json"
    saved.write_text(
        json.dumps(
            {
                "schema_version": 1,
                "command": "check",
                "target": {"host": "h"},
                "duration_s": 1.25,
                "root_cause": "env.shm",
                "results": [{"id": "env.shm", "title": "shm", "status": "fail", "summary": "64 MiB"}],
            }
        )
    )
    proc = run_cli("render", str(saved), "--format", "markdown")
    assert proc.returncode == 1, proc.stderr
    assert "Root cause: `env.shm`" in proc.stdout and "1.2 s" in proc.stdout

    garbage = tmp_path / "bin.json"
    garbage.write_bytes(b"\x00\xff\xfe garbage")
    before = garbage.read_bytes()
    proc = run_cli("render", str(garbage))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert garbage.read_bytes() == before
    assert run_cli("render", str(tmp_path / "missing.json")).returncode == 2


def test_output_file_is_written_whole(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = run_cli("check", "--static", "--format", "json", "--output", str(out))
    assert proc.returncode in (0, 1), proc.stderr
    assert proc.stdout == ""
    assert json.loads(out.read_text())["command"] == "check"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    assert out.stat().st_mode & 0o044 == 0o044  # readable by others, like any file the user writes


def test_internal_error_is_one_line_with_a_log(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ddp_doctor.commands import check

    def boom(args: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(check, "run", boom)
    assert main(["check", "--static"]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "kaboom" in err and "full log:" in err
    log = Path(err.split("full log: ")[1].rstrip(")"))
    assert "RuntimeError: kaboom" in log.read_text()
    log.unlink()


def test_a_command_imports_no_other_commands_module() -> None:
    # Before `check` starts torchrun, the other commands' modules are CPU spent on nothing.
    code = (
        "import sys\n"
        "from ddp_doctor.cli import main\n"
        "try:\n"
        "    main(['check', '--nproc', '0'])\n"  # refused by its parser: nothing runs
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('ddp_doctor.commands.') and m != 'ddp_doctor.commands.options'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.strip() == "['ddp_doctor.commands.check']", done.stdout + done.stderr
