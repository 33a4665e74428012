"""Where a config puts the training data: copied or downloaded into the image (COPY of a data directory,
RUN wget of a data set), or read by the training command from a path no volume provides."""

from __future__ import annotations

import re
from pathlib import Path

from ddp_doctor.deploy.lint.model import At

DATA_WORDS = (
    r"datasets?|imagenet|tiny-imagenet(?:-200)?|ilsvrc\d*|cifar-?10|cifar-?100|mnist|fashion-?mnist|coco|"
    r"voc(?:20\d\d)?|wikitext(?:-\d+)?|squad|glue|openwebtext|shakespeare|librispeech|celeba|kitti|cityscapes"
)
_DATA_SEGMENT = re.compile(rf"(?i)(?:^|[/_.-])(?:{DATA_WORDS}|data)(?:$|[/_.-])")
_DOWNLOAD = re.compile(
    r"\b(?:wget|curl|gsutil\s+(?:-m\s+)?cp|aws\s+s3\s+(?:cp|sync)|azcopy|kaggle\s+datasets\s+download)\b"
)
_FETCH_SCRIPT = re.compile(r"(?i)\b(?:download|prepare|get|fetch)_?(?:data|dataset)s?\w*\.(?:py|sh)\b")
_HUB_DATASET = re.compile(r"load_dataset\(|huggingface-cli\s+download\s.*--repo-type[ =]dataset|download=True")
_SOFTWARE = re.compile(r"(?i)\.(?:deb|rpm|whl|sh|py|run|gpg|key|asc|pub)(?:$|[?\s])|get-pip|/bin/|conda|miniforge|apt")
DATA_DIRS = ("data", "dataset", "datasets")
_DATA_FILE = re.compile(
    r"(?i)(?:\.(?:csv|tsv|parquet|jsonl|ndjson|arrow|feather|tfrecords?|npy|npz)|[.-]idx\d-ubyte)(?:\.(?:gz|bz2|xz|zst))?$"
)
"""Files in the formats data sets are stored in: those Hugging Face datasets loads from local files (CSV,
JSON Lines, Parquet, Arrow: https://huggingface.co/docs/datasets/loading#local-and-remote-files), TFRecord
(https://www.tensorflow.org/tutorials/load_data/tfrecord), NumPy arrays
(https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html) and MNIST's idx files."""
_DATA_FILE_IF_NAMED = re.compile(r"(?i)\.(?:h5|hdf5|pkl|pickle|pt|bin|txt|json)$")
"""Formats that hold models, configs and text as often as data: data only under a data-set word in the path."""


def downloads_data(run: str) -> str | None:
    """What a RUN instruction fetches that is a data set (a URL or path with a data-set word), or None."""
    if _HUB_DATASET.search(run) or _FETCH_SCRIPT.search(run):
        m = _HUB_DATASET.search(run) or _FETCH_SCRIPT.search(run)
        return m.group(0) if m else None
    for step in re.split(r"&&|;|\|\|", run):
        if not _DOWNLOAD.search(step):
            continue
        for word in step.split():
            remote = "://" in word or word.startswith(("s3:", "gs:"))
            if remote and _DATA_SEGMENT.search(word.split("://")[-1]) and not _SOFTWARE.search(word):
                return word.strip("'\"")
    return None


def copies_data(sources: list[str], context: Path | None) -> str | None:
    """A COPY / ADD source that is a data directory or archive, a data file (by its format, or a file of an
    ambiguous format under a data-set word: data/train.json), or a build context (.) that holds a data
    directory .dockerignore does not leave out (read only where the context is on disk)."""
    for src in sources:
        name = src.rstrip("/").rsplit("/", 1)[-1]
        if src not in (".", "./") and _DATA_SEGMENT.search(name) and not _SOFTWARE.search(name):
            return src
        if _DATA_FILE.search(name) or (_DATA_FILE_IF_NAMED.search(name) and _DATA_SEGMENT.search(src)):
            return src
        if src in (".", "./") and context is not None:
            found = _data_dir_in(context)
            if found is not None:
                return f"{src} (the build context, with its {found}/ directory)"
    return None


def _data_dir_in(context: Path) -> str | None:
    try:
        ignore = (context / ".dockerignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        ignore = ""
    ignored = {line.strip().strip("/").lstrip("./") for line in ignore.splitlines()}
    for name in DATA_DIRS:
        if (context / name).is_dir() and name not in ignored and f"{name}/" not in ignored:
            return name
    return None


_INPUT_SEGMENT = re.compile(r"(?i)(?:^|[/_.-])(?:inputs?)(?:$|[/_.-])")


def holds_data(path: str) -> bool:
    """A path named for what a job reads: a data set (data, datasets, coco, imagenet, ...) or its inputs."""
    return _DATA_SEGMENT.search(path) is not None or _INPUT_SEGMENT.search(path) is not None


def data_paths(words: list[At[str]]) -> list[At[str]]:
    """Absolute paths the training command reads data from: the values of data flags, and positional
    paths with a data-set word (the ImageNet example's DIR)."""
    return [w for w in words if w.value.startswith("/") and _DATA_SEGMENT.search(w.value)]
