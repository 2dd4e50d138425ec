"""The structural patterns the Planner's rules read (agents/patterns.py), on small references."""

from __future__ import annotations

import pytest

from kskill.agents.features import reference_features
from kskill.agents.patterns import RECURRENT_LAUNCHES_PER_STEP, has_time_loop

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _features(init: str, forward: str, inputs: str, args: str = "x") -> dict:
    body = "\n".join("        " + line for line in forward.strip().splitlines())
    source = (f"{HEADER}class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              f"        {init or 'self.unused = None'}\n"
              f"    def forward(self, {args}):\n{body}\n\n"
              f"def get_inputs():\n    return {inputs}\n\ndef get_init_inputs():\n    return []\n")
    features = reference_features(source)
    return {**features.values, **{k: None for k in features.unavailable}}


@pytest.mark.parametrize("forward,chain", [
    ("y = self.fc(x)\nreturn y * torch.sigmoid(y)", 2),                       # Swish: the product used twice
    ("y = self.fc(x)\nr = y.clone().detach()\nreturn y * 2.0 + r", 2),        # a residual through a copy
    ("y = self.fc(x)\nreturn torch.relu(y) + 1.0", 2),
    ("y = self.fc(x)\nreturn torch.relu(y), y", 0),                            # the product is returned too
    ("y = self.fc(x)\nreturn torch.softmax(y, dim=1) * y", 0),                 # a use outside the chain
])
def test_epilogue_chain_takes_every_use_of_the_product(forward, chain):
    v = _features("self.fc = nn.Linear(16, 8)", forward, "[torch.randn(4, 16)]")
    assert v["epilogue_chain_after_contraction"] == chain


@pytest.mark.parametrize("forward,chain", [
    ("return torch.mean((x - 1.0) ** 2, dim=1)", 2),       # a prologue the reduction could compute as it loads
    ("return torch.relu(torch.softmax(x, dim=1)) * 3.0", 2),  # an epilogue applied before the store
    ("y = torch.relu(x)\nreturn y.sum(dim=1), y", 0),        # the chain's value is returned as well
    ("return torch.relu(x) * 2.0", 0),                       # no row operator at all
])
def test_row_op_chain(forward, chain):
    assert _features("", forward, "[torch.randn(4, 16)]")["row_op_pointwise_chain"] == chain


@pytest.mark.parametrize("norm, forward, count", [
    ("nn.GroupNorm(2, 4)", "y = torch.tanh(self.norm(x))\nreturn torch.logsumexp(y + x, dim=1)", 1),
    ("nn.InstanceNorm2d(4)", "return F.max_pool2d(self.norm(x) * 2.0, 2)", 1),
    ("nn.GroupNorm(2, 4)", "return torch.relu(self.norm(x))", 0),          # nothing reduces the result
    ("nn.BatchNorm2d(4)", "return self.norm(x).mean(dim=(2, 3))", 0),      # batch statistics: not split
])
def test_a_norm_feeding_a_row_operator_through_pointwise_ops(norm, forward, count):
    assert _features(f"self.norm = {norm}", forward, "[torch.randn(2, 4, 6, 6)]")["norm_into_row_op"] == count


def test_a_recurrent_layer_is_read_as_a_time_loop_with_its_launches():
    v = _features("self.rnn = nn.GRU(8, 16, num_layers=3, batch_first=True, bidirectional=True)",
                  "out, h = self.rnn(x)\nreturn h", "[torch.randn(2, 11, 8)]")
    assert v["has_recurrence"] and v["has_contraction"] and not v["has_gemm"]
    assert v["est_kernel_launches"] >= RECURRENT_LAUNCHES_PER_STEP * 11 * 3 * 2


def test_a_python_loop_over_time_steps_is_a_recurrence():
    forward = """hidden = torch.zeros(x.size(1), 16)
outputs = []
for t in range(x.size(0)):
    hidden = torch.tanh(self.i2h(torch.cat((x[t], hidden), dim=1)))
    outputs.append(hidden)
return torch.stack(outputs)"""
    v = _features("self.i2h = nn.Linear(24, 16)", forward, "[torch.randn(5, 3, 8)]")
    assert v["has_recurrence"]
    assert v["est_kernel_launches"] >= 5 * 2  # unrolled by the capture: a GEMM and a tanh per step


def test_loops_over_layers_or_without_carried_state_are_not_time_loops():
    layers = HEADER + """class Model(nn.Module):
    def forward(self, x):
        for i in range(3):
            x = self.layers[i](x)
        return x
"""
    stateless = HEADER + """class Model(nn.Module):
    def forward(self, x):
        outs = []
        for t in range(4):
            outs.append(torch.relu(x[t]))
        return outs
"""
    carried = HEADER + """class Model(nn.Module):
    def forward(self, x, h):
        for t in range(4):
            h = torch.tanh(x[t] + h)
        return h
"""
    assert not has_time_loop(layers) and not has_time_loop(stateless) and has_time_loop(carried)


@pytest.mark.parametrize("groups,in_channels,width", [(12, 12, 1), (4, 12, 3), (1, 12, None)])
def test_narrowest_convolution_group(groups, in_channels, width):
    v = _features(f"self.conv = nn.Conv2d({in_channels}, 12, 3, groups={groups})", "return self.conv(x)",
                  f"[torch.randn(2, {in_channels}, 9, 9)]")
    assert v["conv_min_group_width"] == width


def test_a_triangular_product_is_structure_to_exploit():
    v = _features("", "return torch.tril(torch.matmul(x, y))", "[torch.randn(32, 32), torch.randn(32, 32)]",
                  args="x, y")
    assert v["triangular_gemm_count"] == 1 and v["simplifiable_patterns"] >= 1


@pytest.mark.parametrize("forward,count", [("return (self.fc(x) / 2 - 1.0).sum(dim=1, keepdim=True)", 1),
                                           ("return self.fc(x).mean(dim=-1)", 1),
                                           ("return self.fc(x).sum(dim=0)", 0),                 # over the batch
                                           ("return torch.sigmoid(self.fc(x)).sum(dim=1)", 0),  # not affine
                                           ("return F.avg_pool1d(self.fc(x).unsqueeze(1), 4).squeeze(1)", 1)])
def test_a_gemm_reduced_over_its_columns_is_counted(forward, count):
    v = _features("self.fc = nn.Linear(16, 12)", forward, "[torch.randn(4, 16)]")
    assert v["reduced_gemm_count"] == count and (v["simplifiable_patterns"] >= 1) == (count >= 1)


@pytest.mark.parametrize("forward,args,inputs,is_loss", [
    ("return torch.mean(torch.clamp(1 - x * y, min=0))", "x, y", "[torch.randn(8, 8), torch.randn(8)]", True),
    ("return torch.mean((x - y) ** 2)", "x, y", "[torch.randn(8, 8), torch.randn(8, 8)]", True),
    ("return torch.mean(torch.relu(x))", "x", "[torch.randn(8, 8)]", False),
    ("return torch.sum(x * y, dim=1)", "x, y", "[torch.randn(8, 8), torch.randn(8, 8)]", False),
])
def test_a_scalar_reduction_over_two_inputs_is_a_loss(forward, args, inputs, is_loss):
    assert _features("", forward, inputs, args=args)["has_loss"] is is_loss


def test_attention_with_a_masked_fill_between_the_products():
    forward = """att = (x @ x.transpose(-2, -1)) * 0.125
att = att.masked_fill(self.mask[:, :, :8, :8] == 0, float('-inf'))
return torch.softmax(att, dim=-1) @ x"""
    v = _features("self.register_buffer('mask', torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8))", forward,
                  "[torch.randn(2, 3, 8, 16)]")
    assert v["has_attention"]


def test_gemm_share_of_the_flops():
    gemm = _features("self.fc = nn.Linear(64, 64)", "return torch.relu(self.fc(x))", "[torch.randn(32, 64)]")
    conv = _features("self.conv = nn.Conv2d(8, 8, 3)\n        self.fc = nn.Linear(8, 2)",
                     "return self.fc(self.conv(x).mean(dim=(2, 3)))", "[torch.randn(2, 8, 32, 32)]")
    assert gemm["gemm_flop_share"] > 0.9 and conv["gemm_flop_share"] < 0.01
