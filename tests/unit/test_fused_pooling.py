"""fused_pooling: 1-d, 2-d and 3-d max / average pooling (padding, dilation, ceil_mode,
count_include_pad, divisor_override), adaptive pooling, and a fused producer."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import build_candidate
from kskill.agents.recipes.templates.columns import column_groups

CALLS_2D = ["F.max_pool2d(torch.relu(x), 3, 2, 1)", "F.avg_pool2d(x, 2)", "F.max_pool2d(x, (2, 3))",
            "F.avg_pool2d(x, 3, 2, 1)", "F.adaptive_avg_pool2d(x, 1)", "F.max_pool2d(x, 3, 1, 1, dilation=2)",
            "F.max_pool2d(x, 2, ceil_mode=True)", "F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)",
            "F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)", "F.avg_pool2d(x, 2, divisor_override=3)",
            "F.adaptive_max_pool2d(x, 1)", "F.adaptive_avg_pool2d(x[:, :, :8, :10], (4, 5))"]


@pytest.mark.parametrize("call", CALLS_2D)
def test_pooling_2d(call):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return {call}\n", "[torch.randn(2, 3, 9, 11)]")
    cand = check(src, ["fused_pooling", "kernel_fusion"])
    assert cand.applied[0] == "fused_pooling"


@pytest.mark.parametrize("call", ["F.max_pool1d(x, 4, 2, 1, dilation=2)", "F.avg_pool1d(x, 5, 1, 2)",
                                  "F.avg_pool1d(x, 4, 3, 2, ceil_mode=True, count_include_pad=False)",
                                  "F.adaptive_avg_pool1d(x, 1)"])
def test_pooling_1d(call):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return {call}\n", "[torch.randn(3, 5, 37)]")
    assert check(src, ["fused_pooling"]).applied == ["fused_pooling"]


@pytest.mark.parametrize("module", ["nn.AvgPool3d(3, 2, 1)", "nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0))",
                                    "nn.AdaptiveAvgPool3d(1)", "nn.AvgPool3d(2, ceil_mode=True)"])
def test_pooling_3d_modules(module):
    src = problem("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  f"        self.pool = {module}\n    def forward(self, x):\n        return torch.sigmoid(self.pool(x))\n",
                  "[torch.randn(2, 3, 7, 6, 9)]")
    cand = check(src, ["fused_pooling", "kernel_fusion"])
    assert "fused_pooling" in cand.applied
    assert cand.source.count("@triton.jit") == 1, "the sigmoid is the pooling kernel's epilogue"


def test_return_indices_declines():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return F.max_pool2d(x, 2, return_indices=True)[0]\n",
                  "[torch.randn(1, 2, 5, 5)]")
    assert check(src, ["fused_pooling"]).applied == []


def test_uneven_adaptive_windows_decline():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return F.adaptive_avg_pool2d(x, (3, 4))\n",
                  "[torch.randn(1, 2, 7, 9)]")
    assert check(src, ["fused_pooling"]).applied == []


# Windows that overlap along H over rows wide enough for a row block: the rolled form (each input row's
# reduction along W shared by the output rows whose windows hold it). Heights and widths are odd, so the
# last strip of rows and the last block of columns are partial.
ROLLED = [("F.max_pool2d(x, 4, 1, 1)", "(2, 3, 37, 45)"), ("F.max_pool2d(torch.relu(x), 3, 2, 1)", "(2, 3, 40, 70)"),
          ("F.avg_pool2d(x, 3, 2, 1)", "(2, 3, 41, 70)"),
          ("F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)", "(2, 3, 41, 70)"),
          ("F.max_pool2d(x, 3, 1, 1, dilation=2)", "(2, 3, 20, 40)"),
          ("F.avg_pool2d(x, 3, 1, 1, divisor_override=5)", "(1, 2, 20, 40)"),
          ("F.avg_pool3d(x, 3, 2, 1)", "(2, 3, 9, 11, 70)"),
          ("F.max_pool3d(x, (2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 0))", "(2, 3, 7, 9, 40)")]


@pytest.mark.parametrize("vector", [True, False])  # True: the default where the window span allows
@pytest.mark.parametrize("unroll", [1, 8])  # 8: the default in 2-d pooling (4 in 3-d)
@pytest.mark.parametrize("call,shape", ROLLED)
def test_overlapping_rows_roll(call, shape, unroll, vector):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return {call}\n",
                  f"[torch.randn{shape}]")
    cand = check(src, ["fused_pooling", "kernel_fusion"], {"UNROLL": unroll, "ROWS": 8, "vector": vector})
    assert cand.applied[0] == "fused_pooling"
    assert "ROWS: tl.constexpr" in cand.source, "the rolled form"
    assert ("tl.split" in cand.source) == vector, "aligned 4-column loads taken apart, or one load per offset"


@pytest.mark.parametrize("call,shape,unroll", [("F.max_pool2d(x, 4, 1, 1)", "(2, 3, 37, 45)", 8),
                                              ("F.avg_pool3d(x, 3, 2, 1)", "(2, 3, 9, 11, 70)", 4)])
def test_output_rows_a_step_by_the_window_depth(call, shape, unroll):
    """Eight output rows a step in 2-d pooling, four in 3-d, where each row loads once per depth offset."""
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return {call}\n",
                  f"[torch.randn{shape}]")
    assert build_candidate(src, ["fused_pooling"]).params["_pool_0"]["UNROLL"] == unroll


@pytest.mark.parametrize("window,groups", [((4, 1, 1, 1), [-1, 0, 1]), ((3, 2, 1, 1), [-1, 0, 1]), ((3, 2, 2, 2), [-1, 0, 1, 2]),
                                           ((3, 1, 1, 2), [-1, 0, 1]), ((2, 1, 0, 1), [0, 1]),
                                           ((13, 1, 6, 1), [])])
def test_column_groups_cover_the_windows_of_four_outputs(window, groups):
    """(kernel, stride, padding, dilation) along W: the aligned 4-column groups holding every input column the
    windows of 4 consecutive outputs read, counted from the group of the first output's column; none past 4."""
    kw, sw, pw, dw = window
    assert column_groups(kw, sw, pw, dw) == groups
    if groups:
        read = {m * sw - pw + k * dw for m in range(4) for k in range(kw)}
        assert read <= set(range(4 * groups[0], 4 * groups[-1] + 4))
        assert min(read) >= 4 * groups[0] > min(read) - 4 and max(read) < 4 * groups[-1] + 4 <= max(read) + 4


def test_wide_windows_keep_one_load_per_offset():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return F.max_pool2d(x, 13, 1, 6)\n",
                  "[torch.randn(1, 2, 30, 40)]")
    cand = check(src, ["fused_pooling"], {"ROWS": 8})
    assert "ROWS: tl.constexpr" in cand.source and "tl.split" not in cand.source
    assert cand.params["_pool_0"]["vector"] is False


@pytest.mark.parametrize("call", ["F.max_pool2d(x, 2)", "F.max_pool2d(x, 3, 1, 1)"])
def test_rows_that_do_not_share_windows_or_fill_a_block_stay_direct(call):
    shape = "(1, 2, 12, 64)" if call.endswith("2)") else "(1, 2, 12, 11)"  # no overlap; rows too narrow
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return {call}\n",
                  f"[torch.randn{shape}]")
    cand = check(src, ["fused_pooling"])
    assert "ROWS: tl.constexpr" not in cand.source


CONV_POOL = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = {conv}

    def forward(self, x):
        return {tail}
'''


@pytest.mark.parametrize("conv, shape, tail, params", [
    ("nn.ConvTranspose2d(4, 6, 3, stride=2)", (2, 4, 5, 6),
     "torch.clamp(F.max_pool2d(torch.relu(self.conv(x)), 2), -0.5, 0.5)", {}),
    ("nn.Conv2d(3, 70, 3)", (2, 3, 9, 8), "F.avg_pool2d(self.conv(x), 3, 2, 1)",  # C over two tiles
     {"BLOCK_S": 16}),
    ("nn.Conv2d(3, 5, 3)", (2, 3, 10, 9), "F.avg_pool2d(self.conv(x) * 2.0, 3, 2, 1, count_include_pad=False)",
     {"BLOCK_S": 8}),  # positions over several tiles, the last ragged
    ("nn.Conv2d(3, 5, 3)", (2, 3, 10, 9), "F.max_pool2d(self.conv(x), 3, 1, 1, dilation=2, ceil_mode=True)", {}),
    ("nn.Conv2d(3, 5, 3)", (2, 3, 10, 9), "F.avg_pool2d(self.conv(x), 3, 2, 1, ceil_mode=True)", {}),
    ("nn.Conv3d(2, 4, 3)", (2, 2, 6, 7, 5), "torch.sigmoid(F.max_pool3d(self.conv(x), 2, 1))", {}),
    ("nn.ConvTranspose3d(2, 3, 3)", (2, 2, 3, 4, 5), "F.avg_pool3d(self.conv(x), 2, divisor_override=3)", {}),
])
def test_a_pooling_reads_its_adopted_convolution_channels_last(conv, shape, tail, params):
    """With channels_last, cuDNN writes the convolution's product NHWC (NDHWC) without its bias and the
    pooling kernel reads it as it lies, [positions, channels] a program, and stores the NCHW result."""
    src = problem(CONV_POOL.format(conv=conv, tail=tail), f"[torch.randn{shape}]")
    cand = check(src, ["channels_last", "fused_pooling", "kernel_fusion"], {"launch": {"_pool_0": params}})
    launcher = cand.source.split("def _pool_0(")[1]
    assert "_to_channels_last(x)" in launcher and ".permute(0, 2, 3, " in launcher and "BLOCK_C=" in launcher
    kernels = cand.source.count("@triton.jit") - cand.source.count("def _nchw_to_nhwc_kernel")  # less the transpose
    assert kernels == 1, "bias, prologue, pooling and epilogue in one kernel"


def test_without_channels_last_the_adopted_convolution_stays_nchw():
    src = problem(CONV_POOL.format(conv="nn.Conv2d(3, 5, 3)", tail="F.max_pool2d(self.conv(x), 2)"),
                  "[torch.randn(2, 3, 9, 8)]")
    cand = check(src, ["fused_pooling", "kernel_fusion"])
    assert "_to_channels_last" not in cand.source and "BLOCK_C=" not in cand.source
