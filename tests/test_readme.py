"""The README's claims hold: every flag and choice it names is in that command's --help, and its first
command ends where it says (one honest warning on a fresh environment, the reason true on this torch)."""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddp_doctor.cli import COMMANDS
from tests.conftest import DOCTOR, ROOT

README = ROOT / "README.md"


def _help(command: str) -> str:
    done = subprocess.run([str(DOCTOR), command, "--help"], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def _choices(help_text: str, flag: str) -> set[str] | None:
    m = re.search(rf"{re.escape(flag)} \{{([^}}]+)\}}", help_text)
    return set(m.group(1).split(",")) if m else None


def _flags_of(command_line: str) -> Iterator[tuple[str, str, str]]:
    words = [w.strip("[]") for w in command_line.replace("\\|", "|").split()]
    if len(words) < 2 or words[0] != "ddp-doctor" or words[1] not in COMMANDS:
        return
    for i, word in enumerate(words[2:], start=2):
        if word == "--" or word.startswith("#"):
            break  # what follows is another program's (the container engine's, the job's) or a comment
        if word.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            yield words[1], word.split("=")[0], "" if nxt.startswith("-") else nxt


def _claims() -> Iterator[tuple[str, str, str]]:
    """(command, flag, value as written) for each flag the README puts beside a command: in a command
    line (`ddp-doctor CMD ... --flag VALUE`, inline or in a code block), in a table row whose first
    cell is that command, and in the sentences 'CMD, ... take `--flag VALUE` ...'."""
    text = README.read_text(encoding="utf-8")
    for span in re.findall(r"`(ddp-doctor [^`]+)`", text):
        yield from _flags_of(span)
    for line in text.splitlines():
        if line.startswith("ddp-doctor "):  # a line of a code block
            yield from _flags_of(line)
        cells = line.split(" | ")
        row = re.match(r"\| `ddp-doctor (\w+)", line)
        if row and row.group(1) in COMMANDS and len(cells) > 1:
            for flag in re.findall(r"`(--[\w-]+)(?: ([^`]+))?`", cells[-1]):
                yield row.group(1), flag[0], flag[1].replace("\\|", "|")
    prose = " ".join(text.split())
    for clause in re.split(r"[;.] ", prose):
        if " take" not in clause:
            continue
        named, _, flags = clause.partition(" take")
        commands = [c for c in re.findall(r"`(\w+)`", named) if c in COMMANDS]
        if re.search(r"\b(every|each|all) commands?\b", named, re.IGNORECASE):
            commands = list(COMMANDS)  # 'Every command takes ...' is a claim about each of them
        for flag in re.findall(r"`(--[\w-]+(?: [^`]+)?)`", flags):
            name, _, value = flag.partition(" ")
            for command in commands:
                yield command, name, value


def test_every_flag_the_readme_names_is_in_that_commands_help() -> None:
    claims = sorted(set(_claims()))
    assert len(claims) > 20 and {c for c, _, _ in claims} >= set(COMMANDS) - {"explain"}
    helps = {c: _help(c) for c in {c for c, _, _ in claims}}
    wrong = []
    for command, flag, value in claims:
        if not re.search(rf"(^|[\s\[,]){re.escape(flag)}\b", helps[command]):
            wrong.append(f"{command} has no {flag}")
            continue
        choices = _choices(helps[command], flag)
        if choices is not None and "|" in value:
            said = set(value.split("|"))
            if not said <= choices:
                wrong.append(f"{command} {flag}: README says {sorted(said)}, --help offers {sorted(choices)}")
    assert wrong == []


def test_the_format_sentence_names_every_format_of_each_command() -> None:
    """'take `--format a|b|c`' lists all of that command's formats, not some."""
    for command, flag, value in set(_claims()):
        if flag == "--format" and "|" in value and value.count("|") >= 2:
            assert set(value.split("|")) == _choices(_help(command), "--format"), command


def test_every_command_that_takes_strict_is_said_to() -> None:
    said = {c for c, flag, _ in _claims() if flag == "--strict"}
    takes = {c for c in COMMANDS if "--strict" in _help(c)}
    assert said == takes


# ---- the first command ---------------------------------------------------------------------------


def _fresh_env(tmp: Path, with_numpy: bool) -> Path:
    """What `pip install torch==2.13.0 .` leaves: torch and ddp-doctor with their dependencies, which
    do not include numpy (torch does not require it). Built from this venv's packages, linked."""
    venv = tmp / "venv"
    subprocess.run([str(Path(os.sys.executable)), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    deps = tmp / "deps"
    deps.mkdir()
    for entry in Path(site.getsitepackages()[0]).iterdir():
        top = entry.name.split("-")[0].split(".")[0].lower()
        if top in ("__editable__", "ddp_doctor") or (top == "numpy" and not with_numpy):
            continue
        (deps / entry.name).symlink_to(entry)
    purelib = next((venv / "lib").glob("python3*/site-packages"))
    (purelib / "deps.pth").write_text(f"{ROOT / 'src'}\n{deps}\n")
    for name, module in (("torchrun", "torch.distributed.run"), ("ddp-doctor", "ddp_doctor.cli")):
        script = venv / "bin" / name
        script.write_text(f"#!{venv}/bin/python\nimport sys\nfrom {module} import main\nsys.exit(main())\n")
        script.chmod(0o755)
    return venv / "bin"


def _in_env(argv: list[str], bin_dir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """As after `source venv/bin/activate`: the environment's bin first on PATH."""
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(cwd), "TMPDIR": str(cwd), "NO_COLOR": "1"}
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env, timeout=300, check=False)


# Run as root (this machine's CI), the README's other warning: env.user.
AS_ROOT = {"env.user": "warn"} if os.geteuid() == 0 else {}


@pytest.fixture
def public_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ddp-doctor-readme-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_the_first_command_ends_in_the_one_warning_the_readme_explains(public_dir: Path) -> None:
    readme = " ".join(README.read_text(encoding="utf-8").split())
    assert "ends in one warning, `env.numpy`" in readme and "`pip install numpy` makes the verdict PASS" in readme
    fresh = _fresh_env(public_dir / "fresh", with_numpy=False)
    done = _in_env([str(fresh / "ddp-doctor"), "check", "--format", "json"], fresh, public_dir)
    failed = [(r["id"], r["summary"]) for r in json.loads(done.stdout)["results"] if r["status"] == "fail"]
    assert done.returncode == 0, failed
    report = json.loads(done.stdout)
    said = {r["id"]: r["status"] for r in report["results"] if r["status"] not in ("pass", "skip")}
    assert said == {"env.numpy": "warn", **AS_ROOT}, said
    assert all(r["status"] == "pass" for r in report["results"] if r["id"].startswith("live."))

    # the reason is true on this torch: an object collective without numpy raises what the README says
    # (each rank writes its own file: two ranks printing into one pipe can interleave their lines)
    job = public_dir / "gather.py"
    job.write_text(
        "import pathlib, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "out = [None] * dist.get_world_size()\n"
        f"mine = pathlib.Path({str(public_dir)!r}, f'raised-{{dist.get_rank()}}')\n"
        "try:\n    dist.all_gather_object(out, dist.get_rank())\nexcept RuntimeError as e:\n    mine.write_text(str(e))\n"
    )
    ran = _in_env([str(fresh / "torchrun"), "--nproc-per-node", "2", str(job)], fresh, public_dir)
    raised = sorted(p.read_text() for p in public_dir.glob("raised-*"))
    assert len(raised) == 2 and all("Numpy is not available" in text for text in raised), ran.stderr[-1000:]

    with_numpy = _fresh_env(public_dir / "with-numpy", with_numpy=True)
    clean = _in_env([str(with_numpy / "ddp-doctor"), "check", "--format", "json"], with_numpy, public_dir)
    report = json.loads(clean.stdout)
    said = {r["id"]: r["status"] for r in report["results"] if r["status"] not in ("pass", "skip")}
    assert clean.returncode == 0 and said == AS_ROOT, said
    assert report["verdict"] == ("warn" if AS_ROOT else "pass")
