"""Memory safety: every template indexes with 64-bit offsets when a tensor it addresses has more
elements than int32 offsets reach, and keeps int32 offsets (fewer registers) otherwise.

The huge problems are captured on the meta device, so nothing of their size is allocated: the
test reads the generated kernel text only.
"""

from __future__ import annotations

import re

import pytest
from recipe_support import problem

from kskill.agents.recipes import build_candidate
from kskill.agents.recipes.templates.common import INT32_SAFE_ELEMENTS, TO_CHANNELS_LAST, program_id, wide_index

BIG = 2**31 + 2**20  # just past int32 offsets

# (technique(s), forward body, input shapes, a small shape of the same rank): one row per template
CASES = {
    "pointwise": (["kernel_fusion"], "torch.relu(x) * 2.0", ["(BIG // 1024, 1024)"]),
    "reduction": (["triton_reduction"], "x.sum(dim=1)", ["(BIG // 4096, 4096)"]),
    "reduction_to_scalar": (["triton_reduction"], "x.sum()", ["(BIG,)"]),
    "reduction_short_rows": (["triton_reduction"], "x.amax(dim=1)", ["(BIG // 256 + 1, 256)"]),
    "logsumexp": (["triton_reduction"], "torch.logsumexp(x, dim=1)", ["(BIG // 4096, 4096)"]),
    "split_group_norm": (["split_normalization", "kernel_fusion"], "torch.relu(self.gn(x))",
                         ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 1)"]),
    "softmax": (["online_softmax"], "torch.softmax(x, dim=-1)", ["(BIG // 2048, 2048)"]),
    "layer_norm": (["fused_normalization"], "self.norm(x)", ["(BIG // 2048, 2048)"]),
    "softmax_exchange": (["online_softmax"], "torch.softmax(x, dim=-1)", ["(BIG // 65536 + 1, 65536)"]),
    "group_norm_exchange": (["fused_normalization"], "self.gn(x)", ["(BIG // (64 * 64 * 64) + 1, 64, 64, 64)"]),
    "batch_norm": (["fused_normalization"], "self.bn(x)", ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 1)"]),
    "scan": (["fused_scan"], "torch.cumsum(x, dim=1)", ["(BIG // 8192, 8192)"]),
    # global pooling: the output is tiny, the input is not (the case that once read out of bounds)
    "avg_pool_global": (["fused_pooling"], "F.adaptive_avg_pool2d(x, 1)", ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 1)"]),
    "avg_pool_window": (["fused_pooling"], "F.avg_pool2d(x, 2)", ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 2)"]),
    "max_pool_1d": (["fused_pooling"], "F.max_pool1d(x, 4)", ["(64, 64, BIG // 4096 + 4)"]),
    "max_pool_rolled": (["fused_pooling"], "F.max_pool2d(x, 3, 1, 1)", ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 2)"]),
    "loss": (["fused_loss"], "F.mse_loss(x, y)", ["(BIG // 1024, 1024)", "(BIG // 1024, 1024)"]),
    "depthwise_conv": (["depthwise_convolution"], "self.dw(x)", ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 3)"]),
    "conv_batch_norm": (["fused_normalization"], "self.bn(self.pw(x))", ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 1)"]),
    "conv_batch_norm_nhwc": (["channels_last", "fused_normalization"], "torch.relu(self.bn(self.pw(x)))",
                             ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 1)"]),
    # a convolution's product read channels-last by the pooling, softmax, reduction and group norm that adopt it
    "conv_pool_nhwc": (["channels_last", "fused_pooling", "kernel_fusion"], "F.max_pool2d(torch.relu(self.pw(x)), 2)",
                       ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 2)"]),
    "conv_softmax_nhwc": (["channels_last", "online_softmax"], "torch.softmax(self.pw(x), dim=1)",
                          ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 1)"]),
    "conv_mean_nhwc": (["channels_last", "triton_reduction"], "self.pw(x).mean(dim=(2, 3))",
                       ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 1)"]),
    "conv_group_norm_nhwc": (["channels_last", "fused_normalization", "kernel_fusion"], "self.gn(torch.relu(self.pw(x)))",
                             ["(64, 64, 1024, BIG // (64 * 64 * 1024) + 1)"]),
    "triangular_gemm": (["algebraic_simplification"], "torch.tril(x @ y)",
                        ["(int(BIG ** 0.5) + 1, 64)", "(64, int(BIG ** 0.5) + 1)"]),
    "row_loss": (["fused_loss"], "F.triplet_margin_loss(x, y, y)", ["(BIG // 1024, 1024)", "(BIG // 1024, 1024)"]),
    "written_loss": (["fused_loss"], "torch.mean(torch.clamp(1 - x * y, min=0))",
                     ["(BIG // 1024, 1024)", "(1024,)"]),
}


def _source(body: str, shapes: list[str], big: int) -> str:
    names = ["x", "y"][:len(shapes)]
    inputs = "[" + ", ".join(f"torch.rand{s.replace('BIG', str(big))}" for s in shapes) + "]"
    model = ("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.norm = nn.LayerNorm(2048)\n        self.bn = nn.BatchNorm2d(64)\n        self.gn = nn.GroupNorm(8, 64)\n"
             "        self.dw = nn.Conv2d(64, 64, 3, groups=64)\n        self.pw = nn.Conv2d(64, 64, 1)\n"
             f"    def forward(self, {', '.join(names)}):\n        return {body}\n")
    return problem(model, inputs)


def _program_ids(source: str) -> list[str]:
    """The program ids of the candidate's own kernels (the shared channels-last transpose is 64-bit always)."""
    source = source.replace(TO_CHANNELS_LAST.strip(), "")
    return re.findall(r"tl\.program_id\(\d\)(?:\.to\(tl\.int64\))?", source)


@pytest.mark.parametrize("case", sorted(CASES))
def test_huge_tensors_get_int64_program_ids(case):
    techniques, body, shapes = CASES[case]
    cand = build_candidate(_source(body, shapes, BIG), techniques)
    assert set(techniques) <= set(cand.applied), cand.notes
    ids = _program_ids(cand.source)
    assert ids, "the candidate has Triton kernels"
    assert all(i.endswith(".to(tl.int64)") for i in ids), f"{case}: int32 program ids in a huge kernel: {ids}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_ordinary_tensors_keep_int32_program_ids(case):
    techniques, body, shapes = CASES[case]
    cand = build_candidate(_source(body, shapes, 2**20), techniques)
    ids = _program_ids(cand.source)
    assert ids and not any("int64" in i for i in ids), f"{case}: {ids}"


def test_the_threshold_leaves_room_for_a_last_block_past_the_end():
    assert not wide_index((1024, 1024))
    assert wide_index((INT32_SAFE_ELEMENTS + 1,))
    # a tensor just under 2^31 still needs int64: its last block's offsets would wrap negative
    assert wide_index((2**31 - 1024,))
    assert program_id(1, True) == "tl.program_id(1).to(tl.int64)"
    assert program_id(0, False) == "tl.program_id(0)"


def test_gemm_triton_backend_with_a_huge_operand():
    src = problem("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.fc = nn.Linear(65536, 64)\n"
                  "    def forward(self, x):\n        return torch.relu(self.fc(x))\n",
                  "[torch.rand(40000, 65536)]")
    cand = build_candidate(src, ["gemm_epilogue_fusion"], {"gemm_backend": "triton", "dot_precision": "tf32x3"})
    ids = _program_ids(cand.source)
    assert ids and all(i.endswith(".to(tl.int64)") for i in ids)
