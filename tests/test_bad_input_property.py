"""Every command's file inputs fed what is not a valid input: random bytes, truncated and corrupt
archives, valid inputs cut short or bit-flipped, nesting far past any parser's depth, devices, and
files another user cannot read. Each answer is exit 0, 1 or 2 (2: one line), never the tool's own
error (exit 3 and a crash log), never a hang, never the machine's memory. Fixed seed, bounded time:
the inputs are the same on every run, and every process has a deadline."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ddp_doctor.report import Report, Result, Status
from tests.conftest import DOCTOR

SEED = 23
PER_PROCESS_S = 30
PER_COMMAND_S = 120
NOBODY = 65534

NCCL_TESTS_LOG = (
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20\n"
    "#                                                              out-of-place                       in-place\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
    "        1024           256     float     sum      -1    20.00    0.05    0.10      0    19.00    0.05    0.10      0\n"
    "     1048576        262144     float     sum      -1    80.00   13.11   26.21      0    79.00   13.27   26.54      0\n"
    "# Avg bus bandwidth    : 13.2\n"
)
MANIFEST = "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: 'b:1'}]}\n"
SPEC = "image: nvcr.io/nvidia/pytorch:24.05-py3\nnodes: 2\ngpus_per_node: 8\n"
LOG = "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error\n"


def _report_json() -> bytes:
    report = Report.for_host("check")
    report.add(Result("env.python", "Python", Status.PASS, "Python 3.11"))
    report.add(Result("env.shm", "/dev/shm", Status.FAIL, "64 MiB", cause="Docker's default", remedy="--shm-size=8g"))
    return json.dumps(report.to_dict()).encode()


def _tar(rng: random.Random) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for i in range(3):
            data = rng.randbytes(rng.randrange(100, 5000))
            info = tarfile.TarInfo(f"layer/file{i}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _zstd(data: bytes) -> bytes:
    zstandard = pytest.importorskip("zstandard")
    return bytes(zstandard.ZstdCompressor().compress(data))


def _flip(data: bytes, rng: random.Random, n: int = 8) -> bytes:
    out = bytearray(data)
    for _ in range(n):
        out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def _cut(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(1, len(data))]


def inputs(valid: bytes) -> dict[str, bytes]:
    """The hostile inputs for a command whose valid input looks like `valid`; the same on every run."""
    rng = random.Random(SEED)
    tar = _tar(rng)
    return {
        "empty": b"",
        "random-1k": rng.randbytes(1024),
        "random-1m": rng.randbytes(1 << 20),
        "nul-bytes": b"\0" * 70_000,
        "valid-cut-short": _cut(valid, rng),
        "valid-bit-flipped": _flip(valid, rng),
        "valid-gzipped-truncated": gzip.compress(valid * 50)[:40],
        "valid-zstd-corrupt": _flip(_zstd(valid * 50), rng, 20),
        "corrupt-gzip": b"\x1f\x8b\x08\x00" + rng.randbytes(4000),
        "truncated-tar": tar[: rng.randrange(600, len(tar) - 600)],
        "tar-of-random-gzip": gzip.compress(tar)[: len(tar) // 3],
        "json-nested-200k": b"[" * 200_000 + b"]" * 200_000,
        "yaml-nested-50k": b"- " * 50_000 + b"x\n",
        "yaml-alias-bomb": b"a: &a [x, x, x, x, x, x, x, x, x]\n"
        + b"".join(
            b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n" % ((c, c) + (c - 1,) * 8) for c in range(98, 110)
        ),
        "long-line": b"x" * (8 << 20),
        "latin1-text": "caf\xe9 \xe0 la cr\xe8me\n".encode("latin-1") * 100,
    }


# command argv ({} is the hostile input) and a valid input of that shape
COMMANDS: dict[str, tuple[list[str], bytes]] = {
    "explain": (["explain", "{}"], LOG.encode()),
    "lint": (["lint", "{}"], MANIFEST.encode()),
    "lint --config": (["lint", "{dir}/ok.yaml", "--config", "{}"], b"[lint]\nignore = []\n"),
    "render": (["render", "{}", "--format", "html"], _report_json()),
    "image": (["image", "{}"], b""),
    "launch --spec": (["launch", "--target", "k8s", "--spec", "{}"], SPEC.encode()),
    "bench --import": (["bench", "--import", "{}"], NCCL_TESTS_LOG.encode()),
    "bench --baseline": (["bench", "--import", "{dir}/ok.log", "--baseline", "{}"], NCCL_TESTS_LOG.encode()),
    "check --python": (["check", "--static", "--python", "{}"], b"#!/bin/sh\nexit 1\n"),
}
DEVICES = ["/dev/zero", "/dev/null", "/dev/urandom"]
NOT_TEXT = {"empty", "random-1k", "random-1m", "nul-bytes", "valid-gzipped-truncated", "valid-zstd-corrupt"}
NOT_TEXT |= {"corrupt-gzip", "truncated-tar", "tar-of-random-gzip", *DEVICES}
"""What explain must refuse (exit 2); the rest is text, which a log may well be."""


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory another uid can enter and where crash logs would land (TMPDIR points here)."""
    path = Path(tempfile.mkdtemp(prefix="ddp-doctor-property-"))
    path.chmod(0o755)
    (path / "ok.yaml").write_text(MANIFEST)
    (path / "ok.log").write_text(NCCL_TESTS_LOG)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _answer(argv: list[str], cwd: Path, prefix: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "TMPDIR": str(cwd), "HOME": str(cwd)}
    return subprocess.run(
        [*prefix, str(DOCTOR), *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=PER_PROCESS_S,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _judge(name: str, proc: subprocess.CompletedProcess[str], cwd: Path) -> str | None:
    """What is wrong with the answer, or None."""
    lines = proc.stderr.strip().splitlines()
    crash_logs = [p.name for p in cwd.iterdir() if p.name.startswith("ddp-doctor-crash-")]
    if proc.returncode not in (0, 1, 2) or crash_logs or "Traceback" in proc.stderr:
        return f"{name}: exit {proc.returncode}, crash logs {crash_logs}: {proc.stderr[-400:]}"
    if proc.returncode == 2 and (len(lines) != 1 or not lines[0].startswith("ddp-doctor: error: ")):
        return f"{name}: exit 2 with {len(lines)} lines: {lines[:3]}"
    return None


def _feed(command: str, cwd: Path, hostile: dict[str, Path | str], prefix: list[str], started: float) -> list[str]:
    argv, _ = COMMANDS[command]
    wrong = []
    for name, path in hostile.items():
        assert time.monotonic() - started < PER_COMMAND_S, f"{command}: over {PER_COMMAND_S} s at {name}"
        args = [a.replace("{dir}", str(cwd)).replace("{}", str(path)) for a in argv]
        proc = _answer(args, cwd, prefix)
        wrong.append(_judge(name, proc, cwd) or "")
        if command == "explain" and proc.returncode == 0 and name in NOT_TEXT:
            wrong.append(f"{name}: explain found a healthy log in what is not one: {proc.stdout[:200]}")
    return [w for w in wrong if w]


@pytest.mark.slow
@pytest.mark.parametrize("command", list(COMMANDS))
def test_hostile_inputs_are_answered_never_crash(command: str, public_dir: Path) -> None:
    _, valid = COMMANDS[command]
    hostile: dict[str, Path | str] = {}
    for name, data in inputs(valid or _tar(random.Random(SEED))).items():
        path = public_dir / name
        path.write_bytes(data)
        path.chmod(0o755)  # check --python runs it: an executable of random bytes
        hostile[name] = path
    for device in DEVICES:
        hostile[device] = device
    assert _feed(command, public_dir, hostile, [], time.monotonic()) == []


_Prefix = Callable[[], list[str]]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unreadable_input_is_one_line_as_another_user(command: str, public_dir: Path) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv (util-linux) to become another user")
    _, valid = COMMANDS[command]
    secret = public_dir / "secret"
    if command == "image":
        (secret / "usr" / "bin").mkdir(parents=True)
        secret.chmod(0o700)
    else:
        secret.write_bytes(valid)
        secret.chmod(0o600)
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    argv, _ = COMMANDS[command]
    args = [a.replace("{dir}", str(public_dir)).replace("{}", str(secret)) for a in argv]
    proc = _answer(args, public_dir, prefix)
    assert _judge("unreadable", proc, public_dir) is None
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-300:], proc.stderr)
    assert "ermission denied" in proc.stderr or "no executable Python" in proc.stderr, proc.stderr
