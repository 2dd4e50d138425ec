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


def test_min_of_two_tensors_is_elementwise_and_a_device_read_off_a_tensor_is_the_inputs():
    """`torch.min(x, torch.tensor(v, device=x.device))` (a KernelBench form): an elementwise minimum,
    not the reduction `torch.min(x, dim)`, fused into the chain; and the constant tensor is made on the
    inputs' device, not on the meta device the capture ran on."""
    from kskill.agents.recipes.capture import capture

    model = '''class Model(nn.Module):
    def forward(self, x):
        x = torch.relu(x)
        x = torch.min(x, torch.tensor(0.5, device=x.device))
        return torch.clamp(x, min=0.1, max=0.4), torch.max(x, dim=1)[0]
'''
    src = problem(model, "[torch.randn(4, 9)]")
    ops = {n.name: n.op for n in capture(src).nodes}
    assert ops["min_1"] == "minimum" and ops["max_1"] == "max"
    cand = check(src, ["kernel_fusion"])
    assert cand.applied == ["kernel_fusion"] and "torch.device('meta')" not in cand.source
    assert "device=x.device" in cand.source


def test_a_scalar_tensor_made_in_forward_from_an_attribute_is_a_constant_of_the_chain():
    """`torch.tensor(self.value)` in forward is a constant that tracing stores on the traced module,
    not on the model: it becomes a graph node made on the inputs' device, and the chain fuses."""
    model = '''class Model(nn.Module):
    def __init__(self, value):
        super().__init__()
        self.value = value
        self.bias = nn.Parameter(torch.randn(5, 1))

    def forward(self, x):
        x = torch.min(x * 2.0, torch.tensor(self.value))
        return (x + self.bias) * 3.0
'''
    cand = check(problem(model, "[torch.randn(3, 5, 7)]", "[0.25]"), ["kernel_fusion"])
    assert cand.applied == ["kernel_fusion"] and "self._tensor_constant0" not in cand.source
