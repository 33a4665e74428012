"""What a person reads is in their words: the exception, the rank and the phase in a headline, never a
result id, a Python repr or a count that does not match; each example of a report that read badly,
through the installed console script."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import FIXTURES, run_cli
from tests.image import imgbuild

CHECK = FIXTURES / "screen" / "check-cpu.json"
RUN = FIXTURES / "screen" / "run-raise.json"
BENCH = FIXTURES / "gpu" / "bench" / "bench.json"
IDS = re.compile(r"\b(?:run|live|env|diag|image|lint|bench)\.[a-z_]+\b")


def _render(path: Path, *flags: str) -> str:
    proc = run_cli("render", str(path), *flags, console=True, env={"COLUMNS": "250"})
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout


def _headline(path: Path) -> str:
    data = json.loads(path.read_text())
    data.pop("headline", None)  # composed now, by this version
    return str(json.loads(run_cli("render", "-", "--format", "json", input=json.dumps(data)).stdout)["headline"])


def test_a_failed_job_is_named_by_its_exception_rank_and_phase() -> None:
    headline = _headline(RUN)
    assert headline.startswith(
        "The job failed: rank 1 raised ValueError: bad batch at step 2 on rank 1, in training step (user code), "
    ), headline
    assert not IDS.search(headline)
    text = _render(RUN)
    root = next(line for line in text.splitlines() if line.startswith("root cause: "))
    # the id that finds its detail block, then what happened in words
    assert root.startswith("root cause: run.failure — rank 1 failed first") and not IDS.search(root[23:]), root
    assert "— The job\n" not in text  # no detail block with nothing in it
    assert "results in" not in text and "rows, -v" not in text
    assert "too few stack samples to judge (rank 0: " in text and "{0:" not in text


def test_the_check_report_reads_in_words() -> None:
    text = _render(CHECK)
    assert "((" not in text.splitlines()[3] and "(the interpreter of the torchrun on PATH, " in text
    assert "0 settings valid" not in text and "(none set)" not in text
    verbose = _render(CHECK, "-v")
    assert not re.search(r"rank (\d+)\s+rank \1:", verbose)  # the where column names the rank once
    assert re.search(
        r"2 disjoint shards of \d+ samples \((no padding|1 sample of padding|\d+ samples of padding)", verbose
    )
    for line in verbose.splitlines():
        if "ranks agree)" in line:  # said only over words that are the same on every rank
            assert not re.search(r"\d+\.\d+–\d+\.\d+", line), line


def test_bench_rounds_a_bandwidth_once(tmp_path: Path) -> None:
    text = _render(BENCH)
    said = re.search(r"the highest bus bandwidth was (\d+\.\d\d) GB/s \((\w+)\)", text)
    assert said, text[:300]
    value, op = said.groups()
    table = text.split(f"# bench.{op}:")[1].split("\n#\n")[0]
    assert value in table  # the headline's number is one of its table's numbers, digit for digit
    assert f"peak busbw {value} GB/s" in text


def test_image_words_are_the_dockerfiles_and_sizes_fit_the_image(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc").mkdir(parents=True)
    (rootfs / "etc" / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
    (rootfs / "hello").write_bytes(b"\x7fELF" + b"\0" * 7000)
    data = imgbuild.tar_dir(rootfs, tmp_path / "layer.tar").read_bytes()
    cfg = imgbuild.config([imgbuild.sha(data)])
    cfg["config"]["Cmd"] = ["/hello"]
    image = imgbuild.oci_layout(tmp_path / "img", [data], compression="gzip", cfg=cfg)
    proc = run_cli("image", str(image), "--format", "json", console=True)
    results = {r["id"]: r for r in json.loads(proc.stdout)["results"]}
    assert results["image.entrypoint"]["summary"] == 'no ENTRYPOINT; CMD ["/hello"]; WORKDIR /work'
    integrity = results["image.integrity"]["summary"]
    assert "GB uncompressed" not in integrity and re.search(r"\d+(\.\d)? KiB uncompressed", integrity), integrity
    assert re.search(r"\b1 layer,", integrity) and "1 layers" not in integrity


def test_lint_of_several_files_names_them(tmp_path: Path) -> None:
    manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: 'b:1'}]}\n"
    names = [tmp_path / f"{n}.yaml" for n in ("a", "b", "c", "d", "e")]
    for n in names:
        n.write_text(manifest)
    proc = run_cli("lint", *map(str, names), console=True, env={"COLUMNS": "250"})
    header = next(line for line in proc.stdout.splitlines() if line.startswith("ddp-doctor lint"))
    assert f"files {names[0]}, {names[1]}, {names[2]} and 2 more" in header and "file 5 files" not in header
