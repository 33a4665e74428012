"""The value checks themselves: closed-form expected sums, and that corruption is counted."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from ddp_doctor.bench import sweep


@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 5, 7, 8, 64])
def test_sum_expected_matches_brute_force(nranks: int) -> None:
    idx = torch.arange(0, 1000, dtype=torch.int64)
    brute = sum(sweep.sum_pattern(r, idx) for r in range(nranks))
    assert torch.equal(sweep.sum_expected(nranks, idx), brute)


def test_patterns_are_exact_in_every_dtype() -> None:
    idx = torch.arange(0, 5000, dtype=torch.int64)
    for dtype in sweep.TORCH_DTYPE.values():
        values = sweep.copy_pattern(3, idx)
        assert torch.equal(values.to(dtype).to(torch.int64), values)
    # Sums over up to 85 ranks stay below 256: exact in bf16.
    assert int(sweep.sum_expected(85, idx).max()) <= sweep.EXACT_INT["bf16"]


def test_corruption_is_counted() -> None:
    idx = torch.arange(0, 4096, dtype=torch.int64)
    expected = sweep.sum_expected(4, idx)
    got = expected.to(torch.bfloat16)
    assert sweep._count_wrong(got, expected, "bf16", exact=True) == 0
    got[17] += 1
    got[4000] = 0
    assert sweep._count_wrong(got, expected, "bf16", exact=True) == 2
    # Rounded sums (beyond the exact range) are compared with a tolerance, corruption still counts.
    big = expected * 1000
    approx = big.to(torch.bfloat16)
    assert sweep._count_wrong(approx, big, "bf16", exact=False) == 0
    approx[5] = -1
    assert sweep._count_wrong(approx, big, "bf16", exact=False) == 1
