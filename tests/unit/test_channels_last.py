"""channels_last: conv regions and their epilogues run in NHWC memory order."""

import pytest
import torch
from recipe_support import check, load, problem

CONV = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)) * 2.0
'''


def test_nhwc_epilogue_matches():
    cand = check(problem(CONV, "[torch.randn(2, 3, 7, 9)]"), ["gemm_epilogue_fusion", "channels_last"])
    assert cand.applied == ["gemm_epilogue_fusion", "channels_last"]
    assert "channels_last" in cand.source and ".permute(0, 2, 3, 1)" in cand.source


def test_needs_a_conv_region():
    cand = check(problem("class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n", "[torch.randn(3)]"),
                 ["channels_last"])
    assert cand.applied == []


CONV_TRANSPOSE = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.bias = nn.Parameter(torch.randn(6, 1, 1))

    def forward(self, x):
        x = self.conv_transpose(x) + self.bias
        return torch.clamp(x, min=0.0, max=1.0) * 0.5
'''


def test_a_transposed_conv_runs_channels_last_without_its_bias_and_fuses_the_epilogue_alone():
    cand = check(problem(CONV_TRANSPOSE, "[torch.rand(2, 4, 5, 7)]"), ["channels_last"])
    assert cand.applied == ["channels_last"]
    assert "torch.nn.functional.conv_transpose2d(x, conv_transpose_weight, None, (2, 2), (1, 1), (1, 1), 1, (1, 1))" \
        in cand.source
    assert "memory_format=torch.channels_last)" in cand.source and "@triton.jit" in cand.source


def test_the_epilogue_fusion_folds_a_transposed_conv_bias_in_nchw():
    cand = check(problem(CONV_TRANSPOSE, "[torch.rand(2, 4, 5, 7)]"), ["gemm_epilogue_fusion"])
    assert cand.applied == ["gemm_epilogue_fusion"]
    assert "conv_transpose2d(x, conv_transpose_weight, None" in cand.source and "channels_last" not in cand.source


CONV3D_VIEW = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        x = torch.clamp(self.conv(x), 0.0, 1.0)
        b, c, d, h, w = x.shape
        x = torch.softmax(x.view(b, c, -1), dim=2)
        return x.view(b, c, d, h, w) * 2.0
'''


def test_a_3d_conv_runs_channels_last_3d_and_a_view_of_its_output_gets_it_in_ncdhw():
    cand = check(problem(CONV3D_VIEW, "[torch.rand(2, 3, 3, 4, 5)]"), ["kernel_fusion", "channels_last"])
    assert "channels_last" in cand.applied
    assert "memory_format=torch.channels_last_3d)" in cand.source and ".permute(0, 2, 3, 4, 1)" in cand.source
    assert "return out0.contiguous()" in cand.source


DEPTHWISE = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv2d = nn.Conv2d(6, 6, 3, groups=6, bias=False)

    def forward(self, x):
        return self.conv2d(x)
'''


def test_a_lone_conv_gets_its_input_in_channels_last_and_returns_its_output_so():
    cand = check(problem(DEPTHWISE, "[torch.rand(2, 6, 7, 9)]"), ["channels_last"])
    assert cand.applied == ["channels_last"]
    assert ("torch.nn.functional.conv2d(_to_channels_last(x), "
            "self.conv2d.weight.contiguous(memory_format=torch.channels_last), None, (1, 1), (0, 0), (1, 1), 6)"
            in cand.source)
    namespace = load(cand.source)
    out = namespace["ModelNew"]()(torch.rand(2, 6, 7, 9))
    assert out.is_contiguous(memory_format=torch.channels_last) and not out.is_contiguous()


CONV_THEN = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(4, 6, 3, bias={bias})
        self.after = {after}

    def forward(self, x):
        return self.after({inner})
'''


def _conv_then(after: str, inner: str = "torch.nn.functional.gelu(self.conv(x))", bias: bool = True) -> str:
    return problem(CONV_THEN.format(after=after, inner=inner, bias=bias), "[torch.rand(2, 4, 5, 7)]")


def test_a_group_norm_after_the_channels_last_pass_gets_its_input_in_nchw():
    cand = check(_conv_then("nn.GroupNorm(2, 6)"), ["channels_last"])
    assert "return out0.contiguous()" in cand.source


def test_a_pool_after_the_channels_last_pass_takes_it_as_it_is():
    cand = check(_conv_then("nn.MaxPool2d(2)"), ["channels_last"])
    assert "memory_format=torch.channels_last" in cand.source
    assert "return out0\n" in cand.source and "out0.contiguous()" not in cand.source


def test_a_lone_conv_before_a_group_norm_returns_nchw():
    cand = check(_conv_then("nn.GroupNorm(3, 6)", inner="self.conv(x)", bias=False), ["channels_last"])
    assert "self.conv.weight.contiguous(memory_format=torch.channels_last), None, (1, 1), (0, 0), (0, 0), 1, " \
           "(1, 1)).contiguous()" in cand.source


def test_a_convolution_inside_a_sequential_is_named_by_index():
    src = problem("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.block = nn.Sequential(nn.Conv2d(3, 4, 1, bias=False))\n\n"
                  "    def forward(self, x):\n        return self.block(x)\n", "[torch.randn(2, 3, 5, 5)]")
    cand = check(src, ["channels_last"])
    assert cand.applied == ["channels_last"] and "_m[1].weight.contiguous(" in cand.source
    assert "            self.block[0],\n" in cand.source  # bound once (emit._bind_indexed)


def _conv_then_mean(conv: str, tail: str) -> str:
    return (f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.conv = {conv}\n\n"
            f"    def forward(self, x):\n        y = self.conv(x) * 0.5\n        return {tail}\n")


@pytest.mark.parametrize("conv, shape, tail, split, channels", [
    ("nn.ConvTranspose2d(3, 5, 3, stride=2)", (2, 3, 6, 5), "torch.mean(y, dim=[2, 3], keepdim=True)", 1, 5),
    ("nn.Conv2d(3, 70, 3)", (2, 3, 9, 8), "y.sum(dim=(2, 3))", 3, 70),             # C over two q-blocks, split
    ("nn.Conv3d(2, 4, 3)", (2, 2, 5, 6, 5), "y.view(2, 4, -1).amax(dim=-1) + 1.0", 1, 4),
])
def test_a_spatial_reduction_reads_the_adopted_convolution_channels_last(conv, shape, tail, split, channels):
    """cuDNN writes the product channels-last and the reduction reads it as an (N, spatial, C) view."""
    cand = check(problem(_conv_then_mean(conv, tail), f"[torch.randn{shape}]"),
                 ["channels_last", "triton_reduction", "kernel_fusion"], {"launch": {"_reduce_0": {"SPLIT": split}}})
    launcher = cand.source.split("def _reduce_0(")[1]
    assert "memory_format=torch.channels_last" in launcher and "__acc__.permute(0, 2, 3, " in launcher
    assert f"Q={channels}," in launcher  # C is the contiguous axis


@pytest.mark.parametrize("conv, shape, tail", [
    ("nn.ConvTranspose2d(3, 6, 3, stride=2)", (2, 3, 5, 4), "torch.min(y, dim=1, keepdim=True)[0]"),
    ("nn.Conv3d(2, 5, 3)", (2, 2, 4, 5, 6), "y.mean(dim=1)"),
])
def test_a_reduction_over_the_channels_reads_rows_of_c_contiguous(conv, shape, tail):
    cand = check(problem(_conv_then_mean(conv, tail), f"[torch.randn{shape}]"),
                 ["channels_last", "triton_reduction", "kernel_fusion"])
    launcher = cand.source.split("def _reduce_0(")[1]
    assert "_to_channels_last(x)" in launcher and "BLOCK_P=" in launcher  # whole rows of C contiguous values


def test_a_reduction_over_part_of_the_spatial_dims_keeps_the_nchw_view():
    src = problem(_conv_then_mean("nn.Conv2d(3, 6, 3)", "y.sum(dim=3)"), "[torch.randn(2, 3, 7, 7)]")
    cand = check(src, ["channels_last", "triton_reduction", "kernel_fusion"])
    assert "_to_channels_last(x)" not in cand.source.split("def _reduce_0(")[1]


@pytest.mark.parametrize("make", [lambda: torch.randn(3, 70, 5, 7),           # C over two tiles
                                  lambda: torch.randn(2, 3, 4, 5, 6),           # 3-d
                                  lambda: torch.randn(2, 5, 9, 4).transpose(2, 3),  # neither layout
                                  lambda: torch.randn(2, 4, 3, 3).contiguous(memory_format=torch.channels_last)])
def test_the_transpose_helper_gives_channels_last_memory_with_the_same_values(make):
    from kskill.agents.recipes.templates.common import TO_CHANNELS_LAST

    namespace = load("import torch\nimport triton\nimport triton.language as tl\n" + TO_CHANNELS_LAST)
    x = make()
    out = namespace["_to_channels_last"](x)
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    assert out.is_contiguous(memory_format=fmt) and torch.equal(out, x)


@pytest.mark.parametrize("conv, shape, tail", [
    ("nn.ConvTranspose3d(2, 6, 3, stride=2)", (2, 2, 3, 4, 3), "torch.sigmoid(torch.softmax(y, dim=1))"),
    ("nn.Conv2d(3, 70, 3)", (2, 3, 7, 6), "torch.log_softmax(y, dim=1) * 2.0"),  # C not a power of two
])
def test_a_softmax_over_the_channels_reads_the_adopted_convolution_channels_last(conv, shape, tail):
    """Each softmax reads its C values contiguous from cuDNN's channels-last product; the result is NCHW."""
    cand = check(problem(_conv_then_mean(conv, tail), f"[torch.randn{shape}]"),
                 ["channels_last", "online_softmax", "kernel_fusion"])
    launcher = cand.source.split("def _softmax_0(")[1]
    assert "_to_channels_last(x)" in launcher and "__acc__.permute(0, 2, 3, " in launcher
    assert "offs_in = pid_p * R * Q + qs * R + rs" in cand.source


def test_a_softmax_over_the_last_dim_keeps_the_nchw_product():
    cand = check(problem(_conv_then_mean("nn.Conv2d(3, 6, 3)", "torch.softmax(y, dim=3)"), "[torch.randn(2, 3, 7, 9)]"),
                 ["channels_last", "online_softmax", "kernel_fusion"])
    assert "offs_in" not in cand.source and "_to_channels_last(x)" not in cand.source.split("def _softmax_0(")[1]


BIASED = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = {conv}
        self.bias = nn.Parameter(torch.randn({bias}))

    def forward(self, x):
        y = self.conv(x) * 0.5
        return {tail}
'''


@pytest.mark.parametrize("conv, shape, bias, tail, kernel", [
    ("nn.ConvTranspose3d(2, 5, 3, stride=2)", (2, 2, 3, 4, 3), "5, 1, 1, 1",
     "F.avg_pool3d(y, 2) + self.bias", "_pool_0"),
    ("nn.Conv2d(3, 6, 3)", (2, 3, 7, 9), "6, 1, 1",
     "torch.logsumexp(torch.mean(y, dim=(2, 3), keepdim=True) + self.bias, dim=1)", "_reduce_0"),
    ("nn.Conv2d(3, 6, 3)", (2, 3, 7, 9), "6, 5, 1", "torch.softmax(y, dim=1) * self.bias", "_softmax_0"),
])
def test_an_epilogue_operand_is_read_in_the_order_of_the_result(conv, shape, bias, tail, kernel):
    """The channels-last forms store their results in NCHW order, so the epilogue's own operands (a bias after
    pooling or a global mean, a scale broadcast over the softmax) are indexed and prepared in that order."""
    src = problem(BIASED.format(conv=conv, bias=bias, tail=tail), f"[torch.randn{shape}]")
    cand = check(src, ["channels_last", "fused_pooling", "triton_reduction", "online_softmax", "kernel_fusion"])
    launcher = cand.source.split(f"def {kernel}(")[1]
    assert "_to_channels_last(x)" in launcher and "__acc__.permute(0, 2, 3, " in launcher
    assert "_to_channels_last(bias" not in launcher  # the epilogue's operand stays as it is


GROUP_NORM = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = {conv}
        self.gn = nn.GroupNorm({groups}, {channels})
        self.scale = nn.Parameter(torch.randn({channels}, *[1] * (x_rank - 2)))

    def forward(self, x):
        return torch.relu(self.gn(F.gelu(self.conv(x))) * self.scale)
'''


@pytest.mark.parametrize("conv, groups, shape, params, form", [
    ("nn.Conv2d(3, 8, 3)", 2, (2, 3, 9, 7), None, "tl.sum(x, axis=0) / R"),                 # a row in registers
    ("nn.Conv3d(2, 8, 3)", 2, (2, 2, 6, 7, 8), None, "tl.sum(x, axis=0) / R"),              # 3-d
    ("nn.Conv2d(3, 8, 3)", 2, (2, 3, 9, 7), {"launch": {"_norm_0": {"BLOCK_R": 64}}}, "for start in range(0, R"),
    ("nn.Conv2d(3, 8, 3)", 2, (2, 3, 9, 7), {"launch": {"_norm_0": {"SPLIT": 3, "BLOCK_R": 16}}}, "_norm_0_stats["),
    ("nn.ConvTranspose2d(3, 16, 3)", 2, (2, 3, 30, 32), None, "row = pid // SPLIT"),        # chunks exchanged
    ("nn.Conv2d(3, 8, 3)", 2, (2, 3, 50, 50), {"group": 2}, "grp = pid // SPLIT"),           # two rows a program
    ("nn.Conv2d(3, 8, 3)", 2, (2, 3, 50, 50), {"pipeline": True, "pipe_chunk": 1024}, "while row0 < ROWS:"),
])
def test_a_group_norm_reads_the_adopted_convolution_channels_last(conv, groups, shape, params, form):
    """Each row (a group of a sample) is walked position by position over the group's channels, contiguous in
    cuDNN's channels-last product; the result, and so the scale after it, is in NCHW order; every row form."""
    channels = int(conv.split(", ")[1])
    src = problem(GROUP_NORM.format(conv=conv, groups=groups, channels=channels).replace("x_rank", str(len(shape))),
                  f"[torch.randn{shape}]")
    cand = check(src, ["channels_last", "fused_normalization", "kernel_fusion"], params)
    launcher = cand.source.split("def _norm_0(")[1]
    assert "_to_channels_last(x)" in launcher and "__acc__.permute(0, 2, 3, " in launcher
    per_group = channels // groups
    assert f"cols // {per_group}) * {channels} + (row" in cand.source and "tl.load(acc_ptr + offs_in" in cand.source
    assert form in cand.source


def test_a_group_norm_of_one_channel_a_group_reads_nchw_and_of_two_reads_channels_last():
    """One channel a group (4 bytes a position, as an instance norm's run) would fetch sectors a program uses a
    fraction of: the product stays NCHW. Two (8 bytes, MIN_RUN_BYTES) are read channels-last."""
    for groups, nhwc in ((8, False), (4, True)):
        model = GROUP_NORM.format(conv="nn.Conv2d(3, 8, 3)", groups=groups, channels=8).replace("x_rank", "4")
        src = problem(model, "[torch.randn(2, 3, 9, 7)]")
        cand = check(src, ["channels_last", "fused_normalization", "kernel_fusion"])
        launcher = cand.source.split("def _norm_0(")[1]
        assert ("offs_in" in cand.source) is nhwc and ("_to_channels_last(x)" in launcher) is nhwc


SHARED = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.gn = nn.GroupNorm(2, 8)
        self.scale = nn.Parameter(torch.randn(8, 1, 1))

    def forward(self, x, z):
        return {body}
'''


@pytest.mark.parametrize("body, technique, nhwc", [
    ("self.gn(self.conv(x) + z) * z", "fused_normalization", False),
    ("torch.softmax(self.conv(x) + z, dim=1) * z", "online_softmax", False),
    ("self.gn(self.conv(x) * self.scale) * self.scale", "fused_normalization", True),  # per channel: one order
    ("torch.softmax(self.conv(x) * self.scale, dim=1) + self.scale", "online_softmax", True),
])
def test_a_tensor_both_sides_of_the_row_operator_read_is_read_in_one_order(body, technique, nhwc):
    """A tensor the prologue and the epilogue both read is prepared once: where its channels-last memory differs
    from its NCHW memory (z here), the product stays NCHW; a per-channel operand lies the same either way."""
    src = problem(SHARED.format(body=body), "[torch.randn(2, 3, 9, 7), torch.randn(2, 8, 7, 5)]")
    cand = check(src, ["channels_last", technique, "kernel_fusion"])
    assert ("offs_in" in cand.source) == nhwc
