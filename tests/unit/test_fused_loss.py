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


def test_kl_div_reads_the_log_in_the_loss_kernel():
    src = problem("class Model(nn.Module):\n    def forward(self, p, q):\n"
                  "        return F.kl_div(torch.log(p), q, reduction='batchmean')\n",
                  "[torch.rand(6, 41) + 0.01, torch.randn(6, 41).softmax(-1)]")
    cand = check(src, ["fused_loss", "kernel_fusion"], {"launch": {"_loss_0": {"BLOCK": 32, "SPLIT": 3}}})
    assert cand.source.count("@triton.jit") == 2  # partial + sum: the log has no kernel of its own
    assert "tl.log(" in cand.source.split("_loss_0_partial")[1]


def test_scalar_op_after_a_loss_stays_outside_the_loss_kernel():
    src = problem("class Model(nn.Module):\n    def forward(self, a, b):\n        return F.mse_loss(a, b) * 3.0 + 1.0\n",
                  "[torch.randn(4, 33), torch.randn(4, 33)]")
    assert "fused_loss" in check(src, ["fused_loss", "kernel_fusion"]).applied
