"""eval/dot_precision_check.py in the Triton interpreter: its GEMM reads nn.Linear's (N, K) weight
as the template does, ragged edges included, and the verdict follows the Reviewer's rule."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("TRITON_INTERPRET", "1")

from kskill.eval import dot_precision_check as check  # noqa: E402


@pytest.mark.parametrize("operands", check.OPERANDS)
def test_the_products_match_eager_on_ragged_shapes(operands: str):
    rows = check.measure(m=20, n=24, k=300, device="cpu", atol=1e-4, rtol=1e-4, operands=operands)
    assert [(r["precision"], r["k_tiles_per_partial_sum"]) for r in rows] == list(check.MODES)
    for r in rows:  # the interpreter computes every precision in fp32: as close to float64 as eager is
        assert r["passes"] and r["passes_with_floor"] and r["elements_out_of_tolerance"] == 0, r
        assert r["max_abs_vs_float64"] <= 2 * r["eager_max_abs_vs_float64"] + 1e-6, r


def test_the_verdict_counts_what_falls_outside_the_tolerance():
    for r in check.measure(m=16, n=16, k=64, device="cpu", atol=0.0, rtol=0.0):  # no tolerance: exact or not
        assert r["passes"] == (r["max_abs_vs_eager"] == 0.0) == (r["elements_out_of_tolerance"] == 0), r
