"""fused_pooling: max / avg pooling with padding and a fused producer."""

import pytest
from recipe_support import check, problem


@pytest.mark.parametrize("call", ["F.max_pool2d(torch.relu(x), 3, 2, 1)", "F.avg_pool2d(x, 2)",
                                  "F.max_pool2d(x, (2, 3))", "F.avg_pool2d(x, 3, 2, 1)", "F.adaptive_avg_pool2d(x, 1)"])
def test_pooling(call):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return {call}\n", "[torch.randn(2, 3, 9, 11)]")
    cand = check(src, ["fused_pooling", "kernel_fusion"])
    assert cand.applied[0] == "fused_pooling"


def test_ceil_mode_declines():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return F.max_pool2d(x, 2, ceil_mode=True)\n",
                  "[torch.randn(1, 2, 5, 5)]")
    assert check(src, ["fused_pooling"]).applied == []
