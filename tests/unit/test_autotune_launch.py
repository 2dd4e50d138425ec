"""autotune_launch: pointwise kernels carry a triton.autotune sweep (one config under the interpreter)."""

from recipe_support import check, problem


def test_autotune_decorator():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x) * 3.0\n", "[torch.randn(5, 129)]")
    cand = check(src, ["kernel_fusion", "autotune_launch"])
    assert cand.applied == ["kernel_fusion", "autotune_launch"]
    assert "@triton.autotune(" in cand.source and "def _configs(" in cand.source
