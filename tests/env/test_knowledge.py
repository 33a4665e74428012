from __future__ import annotations

import pytest

from ddp_doctor import knowledge
from ddp_doctor.knowledge import arch


def test_2_7_ships_cu118_cu126_cu128_and_not_cu121() -> None:
    assert knowledge.official_variants("2.7.0+cu126") == ["cu118", "cu126", "cu128"]
    assert "cu121" not in (knowledge.official_variants("2.7.1") or [])


def test_2_7_bundled_nccl() -> None:
    rel = knowledge.release("2.7.1")
    assert rel is not None
    assert rel["nccl"] == {"cu118": "2.21.5", "cu126": "2.26.2", "cu128": "2.26.2"}


def test_cu121_ends_with_2_5() -> None:
    with_cu121 = [k for k, v in knowledge.releases().items() if "cu121" in v["cuda_variants"]]
    assert max(with_cu121, key=knowledge.version_tuple) == "2.5"


def test_every_release_from_2_0_has_a_source_and_variants() -> None:
    table = knowledge.releases()
    assert {f"2.{m}" for m in range(14)} <= set(table)
    for key, entry in table.items():
        assert entry.get("source"), key
        assert entry["cuda_variants"], key
        for variant in list(entry.get("nccl") or {}) + list(entry.get("arch_list") or {}):
            assert variant in entry["cuda_variants"], (key, variant)


def test_unknown_release_is_none_not_a_guess() -> None:
    assert knowledge.release("1.13.1") is None
    assert knowledge.official_variants("9.0.0") is None
    assert knowledge.release("not-a-version") is None


@pytest.mark.parametrize(
    ("cuda", "compat", "ga"),
    [
        ("11.8", "450.80.02", "520.61.05"),
        ("12.6", "525.60.13", "560.28.03"),
        ("12.8", "525.60.13", "570.26"),
        ("13.0", "580", "580.65.06"),
    ],
)
def test_driver_floors(cuda: str, compat: str, ga: str) -> None:
    floor = knowledge.driver_floor(cuda)
    assert floor is not None
    assert floor["minor_compat"] == compat and floor["ga_driver"] == ga and floor["source"]


def test_install_command_names_the_index() -> None:
    cmd = knowledge.install_command("2.7.0", "cu126", "/opt/venv/bin/python")
    assert (
        cmd == "/opt/venv/bin/python -m pip install 'torch==2.7.0' --index-url https://download.pytorch.org/whl/cu126"
    )


def test_variant_names() -> None:
    assert knowledge.variant_of("12.6") == "cu126" and knowledge.variant_of(None) == "cpu"
    assert knowledge.cuda_of("cu130") == "13.0" and knowledge.cuda_of("cpu") is None


@pytest.mark.parametrize(
    ("sm", "archs", "runs"),
    [
        ("sm_90", ["sm_80", "sm_90"], True),
        ("sm_86", ["sm_80"], True),  # same-major SASS runs on a higher minor
        ("sm_89", ["sm_86", "sm_90"], True),
        ("sm_80", ["sm_86"], False),  # not on a lower minor
        ("sm_100", ["sm_90"], False),  # not across majors
        ("sm_100", ["sm_90", "compute_90"], True),  # PTX JIT across majors
        ("sm_120", ["sm_90a"], False),  # arch-specific only on itself
        ("sm_90", ["sm_90a"], True),
        ("sm_75", ["compute_80"], False),  # PTX only upwards
    ],
)
def test_arch_compatibility(sm: str, archs: list[str], runs: bool) -> None:
    assert arch.runs_on(sm, archs) is runs


def test_variants_supporting_blackwell_on_2_7() -> None:
    assert knowledge.variants_supporting("2.7.0", "sm_120") == ["cu128"]
    assert set(knowledge.variants_supporting("2.7.0", "sm_90")) == {"cu118", "cu126", "cu128"}
