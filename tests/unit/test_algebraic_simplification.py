"""algebraic_simplification: diagonal products, double transposes, neutral constants."""

import pytest
from recipe_support import check, problem


@pytest.mark.parametrize("expr", ["torch.diag(a) @ b", "b @ torch.diag(a)", "(b.t().t() * 1.0) + 0.0"])
def test_rewrites(expr):
    src = problem(f"class Model(nn.Module):\n    def forward(self, a, b):\n        return {expr}\n",
                  "[torch.randn(37), torch.randn(37, 37)]")
    cand = check(src, ["algebraic_simplification", "kernel_fusion"])
    assert cand.applied[0] == "algebraic_simplification"
    assert "diag(" not in cand.source.split("class ModelNew")[1]
