"""fused_normalization: layer/group/instance norm and batch norm in training mode."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import fused_normalization as norm


def _module(ctor: str, post: str = "") -> str:
    return (f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.n = {ctor}\n\n"
            f"    def forward(self, x):\n        return self.n(x){post}\n")


@pytest.mark.parametrize("ctor, shape", [("nn.LayerNorm(37)", (3, 37)), ("nn.LayerNorm((5, 7))", (3, 5, 7)),
                                         ("nn.GroupNorm(3, 6)", (2, 6, 5, 3)), ("nn.InstanceNorm2d(3)", (2, 3, 5, 7)),
                                         ("nn.InstanceNorm2d(3, affine=True)", (2, 3, 5, 7))])
def test_row_norms(ctor, shape):
    cand = check(problem(_module(ctor, " * 2.0"), f"[torch.randn{shape} * 3 + 1]"), ["fused_normalization", "kernel_fusion"])
    assert cand.applied[0] == "fused_normalization"


def test_long_rows_use_chan_merge(monkeypatch):
    monkeypatch.setattr(norm, "MAX_PERSISTENT", 32)
    check(problem(_module("nn.LayerNorm(301)"), "[torch.randn(3, 301) + 4]"), ["fused_normalization"])


@pytest.mark.parametrize("ctor, shape, post", [("nn.LayerNorm((5, 7, 9))", (2, 5, 7, 9), ".relu()"),
                                               ("nn.GroupNorm(2, 6)", (1, 6, 9, 11), " * 2.0"),
                                               ("nn.InstanceNorm1d(3, affine=True)", (1, 3, 301), "")])
def test_few_long_rows_are_split_across_programs(monkeypatch, ctor, shape, post):
    """Rows split across programs (partial statistics, then each program merges its row's), some of
    the chunks empty: 19 programs a row of 315, 32 elements each."""
    monkeypatch.setattr(norm, "MAX_PERSISTENT", 32)
    monkeypatch.setattr(norm, "SPLIT_BLOCK", 32)
    monkeypatch.setattr(norm, "SPLIT_MIN", 16)
    src = problem(_module(ctor, post), f"[torch.randn{shape} * 3 + 1]")
    cand = check(src, ["fused_normalization", "kernel_fusion"])
    assert "_norm_0_stats[" in cand.source and "SPLIT=1," not in cand.source


def test_rows_are_split_only_when_too_few_and_then_fill_every_multiprocessor():
    """16 rows of 4M (a layer norm over (64, 256, 256)): 16 parts a multiprocessor; 896 rows of 2M (a group
    norm's groups) already give each multiprocessor 4 programs, and stay one program a row."""
    assert norm.row_params(16, 1 << 22) == {"BLOCK_R": norm.SPLIT_BLOCK, "num_warps": 16,
                                            "SPLIT": -(-norm.SPLIT_PER_SM * norm.SMS // 16)}
    assert norm.row_params(896, 1 << 21)["SPLIT"] == 1
    assert norm.row_params(4, 20000)["SPLIT"] == 1, "a row shorter than two SPLIT_MIN parts is not split"


def test_split_rows_follow_the_launch_parameters():
    cand = check(problem(_module("nn.LayerNorm(300)", " + 1.0"), "[torch.randn(2, 300)]"),
                 ["fused_normalization", "kernel_fusion"], {"launch": {"_norm_0": {"SPLIT": 3, "BLOCK_R": 16}}})
    assert "_norm_0_stats[(2, 3)]" in cand.source and "CHUNK=112, SPLIT=3, SPLIT_P2=4, BLOCK_R=16" in cand.source


@pytest.mark.parametrize("ctor, shape", [("nn.BatchNorm2d(5)", (3, 5, 7, 9)), ("nn.BatchNorm1d(6)", (9, 6)),
                                         ("nn.BatchNorm2d(4, momentum=0.3)", (2, 4, 3, 3))])
def test_batch_norm_training_updates_running_stats(ctor, shape):
    cand = check(problem(_module(ctor, ".relu()"), f"[torch.randn{shape} * 2 + 1]"), ["fused_normalization", "kernel_fusion"],
                 compare_buffers=True)
    assert "running_mean" in cand.source


def test_batch_norm_split_statistics():
    check(problem(_module("nn.BatchNorm2d(3)"), "[torch.randn(5, 3, 9, 9)]"), ["fused_normalization"],
          {"launch": {"_batch_norm_0": {"SPLIT": 3, "BLOCK": 16}}}, compare_buffers=True)


def test_cumulative_momentum_declines():
    cand = check(problem(_module("nn.BatchNorm2d(3, momentum=None)"), "[torch.randn(2, 3, 4, 4)]"), ["fused_normalization"])
    assert cand.applied == []


def _conv_bn(conv: str, bn: str, tail: str = "torch.relu(y)", extra: str = "") -> str:
    return (f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            f"        self.conv = {conv}\n        self.bn = {bn}\n\n"
            f"    def forward(self, x):\n        y = self.bn(self.conv(x)){extra}\n        return {tail}\n")


@pytest.mark.parametrize("conv,bn,shape", [
    ("nn.Conv2d(3, 5, 3, padding=1)", "nn.BatchNorm2d(5)", (4, 3, 7, 9)),            # the conv's bias folded
    ("nn.Conv2d(4, 6, 3, stride=2, bias=False)", "nn.BatchNorm2d(6, momentum=0.2)", (3, 4, 9, 8)),
    ("nn.ConvTranspose2d(3, 4, 3, stride=2)", "nn.BatchNorm2d(4)", (2, 3, 5, 6)),
    ("nn.Conv3d(2, 3, 3)", "nn.BatchNorm3d(3)", (2, 2, 5, 6, 5)),
])
def test_batch_norm_takes_over_the_convolution_before_it(conv, bn, shape):
    """Training mode: two forwards, so the running statistics are compared after they accumulated."""
    cand = check(problem(_conv_bn(conv, bn), f"[torch.randn{shape}]"), ["fused_normalization", "kernel_fusion"],
                 compare_buffers=True)
    forward = cand.source.split("class ModelNew")[1]
    assert "self.conv(" not in forward and "self.bn(" not in forward
    assert ", None, " in cand.source  # cuDNN without the bias, which the statistics absorb


@pytest.mark.parametrize("order", [["channels_last", "fused_normalization", "kernel_fusion"],
                                   ["fused_normalization", "kernel_fusion", "channels_last"]])
def test_channels_last_statistics_read_the_convolution_as_it_lies(order):
    src = problem(_conv_bn("nn.Conv2d(3, 6, 3, padding=1)", "nn.BatchNorm2d(6)", tail="torch.relu(y) + x.sum()"),
                  "[torch.randn(3, 3, 5, 7)]")
    cand = check(src, order, {"launch": {"_batch_norm_0": {"SPLIT": 2, "BLOCK": 4, "BLOCK_C": 4}}},
                 compare_buffers=True)
    assert set(cand.applied) == set(order)
    assert "memory_format=torch.channels_last" in cand.source and "BLOCK_C: tl.constexpr):" in cand.source
    assert ".permute(0, 1, 2, 3)" not in cand.source


def test_a_convolution_without_epilogue_work_is_left_for_the_norm_to_take_over():
    """channels_last claims first, but a bias-free convolution read only by the norm is no region of its own."""
    src = problem(_conv_bn("nn.Conv2d(3, 6, 3, bias=False)", "nn.BatchNorm2d(6)"), "[torch.randn(2, 3, 6, 7)]")
    cand = check(src, ["channels_last", "fused_normalization", "kernel_fusion"], compare_buffers=True)
    forward = cand.source.split("class ModelNew")[1]
    assert "self.conv(" not in forward and "conv2d(" not in forward  # the conv runs inside the norm's launcher
    assert "BLOCK_C: tl.constexpr):" in cand.source


def test_eval_mode_subtracts_the_folded_bias_from_the_running_mean():
    src = problem(_conv_bn("nn.Conv2d(3, 5, 1)", "nn.BatchNorm2d(5).eval()"), "[torch.randn(2, 3, 4, 4)]")
    cand = check(src, ["fused_normalization"])
    assert "mean = mean - tl.load(shift_ptr" in cand.source


def test_a_depthwise_convolution_is_left_to_its_stencil():
    src = problem(_conv_bn("nn.Conv2d(4, 4, 3, groups=4)", "nn.BatchNorm2d(4)"), "[torch.randn(2, 4, 6, 6)]")
    cand = check(src, ["fused_normalization", "depthwise_convolution"], compare_buffers=True)
    assert cand.applied == ["fused_normalization", "depthwise_convolution"]


def test_a_convolution_used_elsewhere_stays_outside():
    src = problem(_conv_bn("nn.Conv2d(3, 5, 1)", "nn.BatchNorm2d(5)", tail="y", extra=" + self.conv(x)"),
                  "[torch.randn(2, 3, 4, 4)]")
    cand = check(src, ["fused_normalization"], compare_buffers=True)
    assert "self.conv(x)" in cand.source.split("class ModelNew")[1]


@pytest.mark.parametrize("dtype", ["torch.float16", "torch.bfloat16"])
def test_conv_batch_norm_in_half_precision_within_its_tolerance(dtype):
    src = problem(_conv_bn("nn.Conv2d(3, 4, 3, padding=1)", "nn.BatchNorm2d(4)").replace(
        "        self.bn = nn.BatchNorm2d(4)\n", f"        self.bn = nn.BatchNorm2d(4)\n        self.to({dtype})\n"),
        f"[torch.randn(2, 3, 6, 5, dtype={dtype})]")
    cand = check(src, ["fused_normalization", "kernel_fusion"])
    assert "self.conv(" not in cand.source.split("class ModelNew")[1]


@pytest.mark.parametrize("shape, params", [((2, 3, 20, 22), {}), ((2, 3, 72, 72), {}),
                                           ((2, 3, 72, 72), {"row_exchange": False}),
                                           ((2, 3, 72, 72), {"launch": {"_norm_0": {"SPLIT": 4}}})])
def test_convolution_read_again_by_the_epilogue_is_adopted(shape, params):
    """conv -> group norm -> ... + conv (a residual): the convolution runs without its bias inside the norm's
    launcher, and the epilogue's residual reads the biased value the norm loaded; every row form."""
    src = problem("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.conv = nn.Conv2d(3, 8, 3)\n        self.gn = nn.GroupNorm(4, 8)\n"
                  "    def forward(self, x):\n        c = self.conv(x)\n"
                  "        return torch.logsumexp(c + F.hardswish(torch.tanh(self.gn(c))), dim=1, keepdim=True)\n",
                  f"[torch.randn{shape}]")
    cand = check(src, ["fused_normalization", "kernel_fusion"], params)
    forward = cand.source.split("def forward")[-1]
    assert "self.conv(" not in forward and "__acc__ = torch.nn.functional.conv2d(" in cand.source
    assert "conv_ptr" not in cand.source, "the residual reads registers, not the convolution's output"


MODES = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = {bn}
        self.drop = nn.Dropout({p})

    def forward(self, x):
        return self.drop(self.bn(self.conv(x) * 2.0)).mean(dim=(2, 3))
'''


@pytest.mark.parametrize("techniques", [["fused_normalization", "kernel_fusion"], ["cuda_graph"]])
def test_a_module_switched_to_the_other_mode_gets_the_reference_forward(techniques):
    """The kernels are generated for the mode the modules were captured in (training: batch statistics);
    after model.eval() the candidate must use the running statistics, as the reference does."""
    from recipe_support import load
    import torch

    src = problem(MODES.format(bn="nn.BatchNorm2d(4)", p=0.0), "[torch.randn(2, 3, 8, 8)]")
    cand = check(src, techniques, compare_buffers=True)
    assert "if self.bn.training is not True:" in cand.source and "self.drop.training" not in cand.source
    torch.manual_seed(0)
    ref = load(src)["Model"]()
    torch.manual_seed(0)
    new = load(cand.source)["ModelNew"]()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        ref(x), new(x)  # one training step: the running statistics move
        ref.eval(), new.eval()
        torch.testing.assert_close(new(x), ref(x), atol=1e-5, rtol=1e-5)


def test_no_guard_where_no_op_depends_on_the_mode():
    """Batch statistics in both modes (no running statistics) and a dropout of p = 0: eval() keeps the kernels."""
    src = problem(MODES.format(bn="nn.BatchNorm2d(4, track_running_stats=False)", p=0.0), "[torch.randn(2, 3, 8, 8)]")
    cand = check(src, ["fused_normalization", "kernel_fusion"])
    assert ".training is not" not in cand.source
