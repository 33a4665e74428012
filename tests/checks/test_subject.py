"""One registry, judged through subjects: what a subject cannot say is left out, a malformed record is
an error, tags pick units, and the image answers the ids its report lists."""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

from ddp_doctor.checks import registry
from ddp_doctor.checks.facts.host import UserFacts
from ddp_doctor.image.subject import ImageSubject
from ddp_doctor.report import Status

F = TypeVar("F")


@dataclass(frozen=True)
class OnlyUser:
    """A subject that knows the user alone, and breaks on the shm record."""

    name: str = "env"
    skip_tag: str = ""

    def facts(self, kind: type[F]) -> F | None:
        if kind is UserFacts:
            return kind.from_env({"user": {"uid": 1000, "name": "u", "root": False}})  # type: ignore[attr-defined,no-any-return]
        if kind.__name__ == "ShmFacts":
            raise KeyError("size_bytes")
        return None

    def skipped(self, tags: frozenset[str]) -> str | None:
        return "skipped here" if self.skip_tag in tags else None


def test_a_subject_gives_what_it_can_say_and_the_rest_is_left_out() -> None:
    results = {r.id: r for r in registry.evaluate(OnlyUser())}
    assert set(results) == {"env.user", "env.shm"}
    assert results["env.user"].status is Status.PASS
    assert results["env.shm"].status is Status.ERROR and "KeyError" in results["env.shm"].summary


def test_tags_pick_units_and_a_subject_skips_by_tag() -> None:
    assert [r.id for r in registry.evaluate(OnlyUser(), tags={"torch_build"})] == []
    skipped = registry.evaluate(OnlyUser(skip_tag="environment"), tags={"environment"})
    assert {r.id for r in skipped} >= {"env.torch.installed", "env.nccl", "env.gpu_arch"}
    assert {r.status for r in skipped} == {Status.SKIP}


def test_every_unit_names_its_subjects_and_the_image_lists_the_ids_it_answers() -> None:
    assert all(unit.ids for unit in registry.ALL)
    image_ids = [unit.id_for("image") for unit in registry.ALL if "image" in unit.ids]
    assert list(dict.fromkeys(image_ids)) == [
        "image.integrity",
        "image.python",
        "image.torch",
        "image.official_build",
        "image.nccl",
        "image.cuda_runtime",
        "image.cudnn",
        "image.torchrun",
        "image.user",
        "image.env",
        "image.entrypoint",
        "image.run_command",
    ], "the image report's order"


def _image(installed: bool) -> dict[str, Any]:
    torch = {
        "installed": installed,
        "version": "2.13.0+cpu" if installed else None,
        "flavour": "cpu" if installed else None,
    }
    return {"torch": torch, "python": {"executable": "/usr/bin/python3", "interpreters": ["/usr/bin/python3"]}}


def test_image_torch_is_the_build_when_installed_and_the_install_when_not() -> None:
    subject = ImageSubject
    missing = {r.id: r for r in registry.evaluate(subject(_image(False)))}.get("image.torch")
    present = {r.id: r for r in registry.evaluate(subject(_image(True)))}.get("image.torch")
    assert missing is not None and missing.title == "torch installed" and missing.status is Status.FAIL
    # the build's verdict (an image is read as one meant for GPUs), not "torch installed"
    assert present is not None and present.title == "torch build flavour" and "CPU-only torch" in present.summary


def _package_of(tmp_path: Path, name: str, units: dict[str, str]) -> ModuleType:
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    for module, order in units.items():
        (root / f"{module}.py").write_text(
            "from ddp_doctor.checks.model import Check, Finding\nfrom ddp_doctor.report import Status\n\n"
            "def judge(f: int) -> Finding:\n    return Finding(Status.PASS, 'fine')\n\n"
            f"UNIT = Check(name={module!r}, title={module!r}, facts=int, judge=judge, ids={{'env': 'env.{module}'}}, "
            f"order={order})\n"
        )
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_the_registry_finds_every_unit_in_order_and_refuses_two_at_one_place(tmp_path: Path) -> None:
    assert [u.order for u in registry.ALL] == sorted(u.order for u in registry.ALL)
    assert len({u.order for u in registry.ALL}) == len(registry.ALL)
    found = registry.discover(_package_of(tmp_path, "units_ok", {"zeta": 1, "alpha": 2}))
    assert [u.name for u in found] == ["zeta", "alpha"], "order, not the file names, places them"
    with pytest.raises(ValueError, match="both have order 7"):
        registry.discover(_package_of(tmp_path, "units_clash", {"one": 7, "two": 7}))


def test_image_only_units_run_through_the_registry_and_a_malformed_field_is_an_error() -> None:
    facts = {
        **_image(True),
        "image": {
            "format": "docker-archive",
            "verified_blobs": 3,
            "layer_count": 2,
            "uncompressed_bytes": 1 << 20,
            "entries": 10,
            "config": {"Entrypoint": ["/bin/sh"], "Cmd": None, "User": "1000"},
            "name": "t:1",
        },
        "torchrun": {"on_path": "/usr/bin/torchrun", "path": "/usr/bin/torchrun"},
    }
    results = {r.id: r for r in registry.evaluate(ImageSubject(facts))}
    ids = list(results)
    assert (ids[0], ids[-1]) == ("image.integrity", "image.run_command")
    assert results["image.integrity"].status is Status.PASS and "3 blobs match" in results["image.integrity"].summary
    assert results["image.entrypoint"].summary.startswith('ENTRYPOINT ["/bin/sh"]; no CMD')
    assert "--entrypoint ''" in (results["image.run_command"].remedy or "")
    assert results["image.cudnn"].status is Status.SKIP  # a CPU build of torch
    broken = {**facts, "image": {**facts["image"], "config": {"Entrypoint": {"not": "a list"}}}}
    again = {r.id: r for r in registry.evaluate(ImageSubject(broken))}
    assert (
        again["image.entrypoint"].status is Status.ERROR and "Entrypoint is dict" in again["image.entrypoint"].summary
    )
    assert again["image.integrity"].status is Status.PASS
