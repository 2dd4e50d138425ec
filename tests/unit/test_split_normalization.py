"""split_normalization: a norm as a statistics kernel and a pointwise pass that fuses into its neighbours."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import applicable

GROUP_NORM_LSE = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.norm = nn.GroupNorm(4, 8)

    def forward(self, x):
        y = self.conv(x)
        z = torch.tanh(self.norm(y))
        return torch.logsumexp(y + z * F.hardswish(z), dim=1, keepdim=True)
'''


def test_the_normalized_tensor_is_never_written_when_a_reduction_takes_it():
    """conv -> group norm -> pointwise -> logsumexp over channels: the statistics kernel, then one
    reduction that normalises as it loads; nothing of the norm's output shape is allocated."""
    cand = check(problem(GROUP_NORM_LSE, "[torch.randn(2, 3, 9, 11)]"),
                 ["split_normalization", "kernel_fusion", "triton_reduction"])
    assert cand.applied == ["split_normalization", "kernel_fusion", "triton_reduction"]
    forward = cand.source[cand.source.index("class ModelNew"):]
    assert "_norm_statistics_0(conv)" in forward and forward.count("= _") == 2
    assert "(2, 8, 7, 9)" not in cand.source.split("def _reduce_1")[1]  # only the (2, 1, 7, 9) result


@pytest.mark.parametrize("split", [1, 3])
def test_layer_norm_statistics_split_across_programs(split):
    model = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm((5, 40))

    def forward(self, x):
        return torch.mean(F.gelu(self.norm(x)), dim=(1, 2))
'''
    params = {"launch": {"_norm_statistics_0": {"SPLIT": split, "BLOCK_R": 32}}}
    cand = check(problem(model, "[torch.randn(3, 5, 40) * 4.0 + 3.0]"),
                 ["split_normalization", "kernel_fusion", "triton_reduction"], params)
    assert cand.params["_norm_statistics_0"]["SPLIT"] == split
    assert ("_norm_statistics_0_partial" in cand.source) == (split > 1)


def test_without_kernel_fusion_the_pointwise_pass_is_one_kernel():
    model = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.InstanceNorm3d(4, affine=True)

    def forward(self, x):
        return self.norm(x)
'''
    cand = check(problem(model, "[torch.randn(2, 4, 3, 5, 6)]"), ["split_normalization"])
    forward = cand.source[cand.source.index("class ModelNew"):]
    assert "_norm_statistics_0(x)" in forward and "_pointwise_1(x, norm_mean, norm_rstd" in forward


def test_a_norm_called_as_a_function_is_left_alone():
    """F.group_norm's weight is an operand, not a module parameter the pointwise pass could read."""
    model = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4) + 2.0)

    def forward(self, x):
        return torch.logsumexp(F.group_norm(x, 2, self.w), dim=1)
'''
    assert not applicable(problem(model, "[torch.randn(2, 4, 5, 5)]"), "split_normalization").ok


@pytest.mark.parametrize("layer, inputs", [
    ("nn.BatchNorm2d(4)", "[torch.randn(2, 4, 5, 5)]"),  # batch statistics and running buffers: fused_normalization
    ("nn.GroupNorm(2, 4)", "[torch.randn(2, 4, 5, 5).half()]"),  # fp16: statistics and pass would be fp32
])
def test_norms_it_leaves_alone(layer, inputs):
    model = f'''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = {layer}

    def forward(self, x):
        return self.norm(x)
'''
    assert not applicable(problem(model, inputs), "split_normalization").ok
