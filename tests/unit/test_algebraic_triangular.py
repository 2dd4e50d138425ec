"""algebraic_simplification on tril/triu of a product: only the kept side of the diagonal is computed."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import applicable

SMALL_TILES = {"launch": {"_triangular_gemm_0": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}}}


def _source(call: str, m: int, k: int, n: int) -> str:
    return problem(f"class Model(nn.Module):\n    def forward(self, a, b):\n        return {call}\n",
                   f"[torch.randn({m}, {k}), torch.randn({k}, {n})]")


@pytest.mark.parametrize("call,m,k,n", [
    ("torch.tril(torch.matmul(a, b))", 67, 29, 67),
    ("torch.triu(torch.matmul(a, b))", 50, 33, 50),
    ("torch.tril(torch.matmul(a, b), diagonal=-5)", 45, 17, 61),   # below the diagonal, a wide product
    ("torch.triu(a @ b, 3)", 61, 20, 40),
])
@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_triangular_products_match(call, m, k, n, precision):
    cand = check(_source(call, m, k, n), ["algebraic_simplification"], {**SMALL_TILES, "dot_precision": precision})
    assert cand.applied == ["algebraic_simplification"]
    kernel = cand.source.split("@triton.jit")[1]
    assert "k_end = tl.where(" in kernel and "for k0 in range(0, k_end, BLOCK_K)" in kernel
    assert "torch.matmul" not in cand.source.split("class ModelNew")[1]


def test_a_product_used_elsewhere_is_not_masked_in_place():
    src = problem("class Model(nn.Module):\n    def forward(self, a, b):\n        c = a @ b\n"
                  "        return torch.tril(c) + c\n", "[torch.randn(8, 8), torch.randn(8, 8)]")
    assert not applicable(src, "algebraic_simplification").ok
