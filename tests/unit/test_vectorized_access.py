"""vectorized_access: contiguity hints and larger blocks in pointwise kernels."""

from recipe_support import check, problem


def test_hints_and_correctness():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return torch.exp(x) - 1.0\n", "[torch.randn(3, 1037)]")
    cand = check(src, ["kernel_fusion", "vectorized_access"])
    assert cand.applied == ["kernel_fusion", "vectorized_access"]
    assert "tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)" in cand.source
