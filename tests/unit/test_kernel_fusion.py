"""kernel_fusion: pointwise chains become one Triton kernel (interpreter, odd shapes)."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import applicable

CHAIN = '''class Model(nn.Module):
    def forward(self, x, y):
        z = F.gelu(x) * 2.0 + y
        z = torch.sigmoid(z) - torch.tanh(x)
        return F.leaky_relu(z, 0.1) / (torch.abs(y) + 1.0)
'''


@pytest.mark.parametrize("shape, bshape", [((3, 37), (37,)), ((5, 7, 9), (7, 1)), ((129,), (129,))])
def test_fused_chain_matches_reference(shape, bshape):
    src = problem(CHAIN, f"[torch.randn{shape}, torch.randn{bshape}]")
    cand = check(src, ["kernel_fusion"])
    assert cand.applied == ["kernel_fusion"]
    # one kernel for the full-shape chain, one for abs(y) + 1 when y broadcasts
    assert cand.source.count("@triton.jit") == (1 if shape == bshape else 2)
    assert "import kskill" not in cand.source and "kskill." not in cand.source.replace("kskill's", "")


def test_many_activations():
    model = '''class Model(nn.Module):
    def forward(self, x):
        a = F.silu(x) + F.mish(x) + F.elu(x) + F.selu(x) + F.hardswish(x) + F.softplus(x)
        return torch.clamp(a, min=-1.0, max=3.0) + F.hardtanh(x) + F.relu6(x) + F.gelu(x, approximate="tanh")
'''
    check(problem(model, "[torch.randn(5, 129) * 3]"), ["kernel_fusion"])


def test_fp16_uses_fp16_tolerance():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x * 3.0 + 1.0)\n",
                  "[torch.randn(7, 33).half()]")
    check(src, ["kernel_fusion"])


def test_not_applicable_without_pointwise():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return x.sum(dim=1)\n", "[torch.randn(3, 5)]")
    verdict = applicable(src, "kernel_fusion")
    assert not verdict.ok and "pointwise" in verdict.reason
