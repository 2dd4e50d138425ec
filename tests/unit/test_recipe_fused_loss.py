"""fused_loss: losses computed and reduced in one pass."""

import pytest
from recipe_support import check, problem


@pytest.mark.parametrize("call", ["F.mse_loss(a, b)", "F.l1_loss(a, b, reduction='sum')", "F.smooth_l1_loss(a, b, beta=0.5)",
                                  "F.huber_loss(a, b, delta=0.7)", "F.kl_div(torch.log(a.softmax(-1)), b.softmax(-1), reduction='batchmean')"])
def test_elementwise_losses(call):
    src = problem(f"class Model(nn.Module):\n    def forward(self, a, b):\n        return {call}\n",
                  "[torch.randn(5, 37), torch.randn(5, 37)]")
    assert "fused_loss" in check(src, ["fused_loss"]).applied


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy(reduction):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x, t):\n        return F.cross_entropy(x, t, reduction='{reduction}')\n",
                  "[torch.randn(7, 37), torch.randint(0, 37, (7,))]")
    assert check(src, ["fused_loss"], {"launch": {"_loss_0": {"BLOCK_R": 16}}}).applied == ["fused_loss"]
