"""depthwise_convolution: depthwise and narrow grouped conv2d as a direct Triton stencil, checked against
nn.Conv2d in Triton's interpreter over odd shapes, strides, paddings, dilations and dtypes."""

import pytest
import torch
from recipe_support import assert_close, check, load, problem

from kskill.agents.recipes import applicable, build_candidate


def _conv_problem(c_in: int, c_out: int, groups: int, kernel, stride=1, padding=0, dilation=1, bias=True,
                  tail: str = "", shape=(2, None, 9, 11), dtype: str = "") -> str:
    model = (f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             f"        self.conv = nn.Conv2d({c_in}, {c_out}, {kernel!r}, stride={stride!r}, padding={padding!r}, "
             f"dilation={dilation!r}, groups={groups}, bias={bias}){dtype}\n"
             f"    def forward(self, x):\n        return {tail or 'self.conv(x)'}\n")
    n, _, h, w = shape
    cast = dtype.replace(".to(", "").rstrip(")") if dtype else ""
    inputs = f"[torch.randn({n}, {c_in}, {h}, {w}{', dtype=' + cast if cast else ''})]"
    return problem(model, inputs)


@pytest.mark.parametrize("c_in,c_out,groups,kernel,stride,padding,dilation,bias", [
    (5, 5, 5, 3, 1, 0, 1, False),                 # depthwise, valid padding
    (6, 6, 6, (3, 1), 1, 1, 1, True),              # asymmetric kernel, padding on both sides
    (4, 8, 4, (2, 3), (2, 1), (1, 2), (1, 2), True),  # depth multiplier 2, stride, dilation
    (8, 4, 2, 3, 2, 1, 1, False),                  # grouped: 4 input channels per group, 2 out
    (9, 9, 3, (1, 3), 1, (0, 1), 1, True),         # grouped: 3 per group
])
@pytest.mark.parametrize("vector", [True, False])  # aligned 4-column loads taken apart (the default), or a load per tap
def test_matches_conv2d(c_in, c_out, groups, kernel, stride, padding, dilation, bias, vector):
    src = _conv_problem(c_in, c_out, groups, kernel, stride, padding, dilation, bias)
    cand = check(src, ["depthwise_convolution"], {"vector": vector})
    assert cand.applied == ["depthwise_convolution"]
    assert "torch.nn.functional.conv2d" not in cand.source and "self.conv(x)" not in cand.source.split("class ModelNew")[1]
    assert ("tl.split" in cand.source) == vector


@pytest.mark.parametrize("tile_major", [False, True])  # True: the default grid, a plane's tiles consecutive
@pytest.mark.parametrize("kernel,padding", [((3, 7), 0), (3, 1)])
def test_vector_form_over_several_column_tiles(kernel, padding, tile_major):
    """Rows wider than a tile (70 outputs: a second, ragged tile of 64) in the vector form; with the grid
    either way round."""
    src = _conv_problem(3, 3, 3, kernel, padding=padding, shape=(2, None, 6, 76))
    cand = check(src, ["depthwise_convolution"], {"BLOCK_H": 4, "vector": True, "tile_major": tile_major})
    assert cand.params["_depthwise_conv_0"]["vector"] is True
    assert ("job % TILES" in cand.source) == tile_major


def test_wide_rows_take_the_rolled_vector_form_by_default():
    """Rows of 128 outputs or more under a window wider than a column that slides by one row: the rolled form
    (strips of ROLL rows, 256 columns, the last rows and columns ragged); a (3, 1) window, or a stride of 2
    along H, the direct vector form in tiles of 2 x 256; narrower rows the column form."""
    wide = check(_conv_problem(2, 2, 2, 3, padding=1, shape=(1, None, 21, 137)), ["depthwise_convolution"])
    assert wide.params["_depthwise_conv_0"] == {"ROLL": 4, "UNROLL": 2, "BLOCK_W": 256, "num_warps": 2,
                                                "vector": True, "tile_major": True, "BLOCK_H": 4}
    assert "for t in range(0, 6, 2):" in wide.source
    for kernel, stride in (((3, 1), 1), (3, (2, 1))):
        direct = check(_conv_problem(2, 2, 2, kernel, stride=stride, padding=1, shape=(1, None, 9, 137)),
                       ["depthwise_convolution"])
        assert direct.params["_depthwise_conv_0"] == {"BLOCK_H": 2, "BLOCK_W": 256, "num_warps": 4, "vector": True,
                                                      "tile_major": True}
    narrow = build_candidate(_conv_problem(2, 2, 2, 3, padding=1, shape=(1, None, 5, 100)), ["depthwise_convolution"])
    assert narrow.params["_depthwise_conv_0"]["vector"] is False and "tl.split" not in narrow.source


@pytest.mark.parametrize("vector", [True, False])
@pytest.mark.parametrize("roll,unroll", [(4, 2), (5, 3)])  # strips shorter than the plane, ragged last steps
@pytest.mark.parametrize("c_in,c_out,groups,kernel,padding,dilation", [
    (2, 2, 2, (3, 7), 0, 1),       # depthwise, a wide window, no padding
    (2, 4, 2, (2, 3), (1, 2), (1, 2)),  # depth multiplier 2, padding, dilation along W
    (4, 2, 2, 3, 1, 1),            # grouped: 2 input channels per group
])
def test_the_rolled_form_matches_conv2d(c_in, c_out, groups, kernel, padding, dilation, roll, unroll, vector):
    """Against nn.Conv2d over 11 rows (strips of 4 or 5 leave a ragged last one) by 70 columns (a second,
    ragged column tile of 64)."""
    src = _conv_problem(c_in, c_out, groups, kernel, padding=padding, dilation=dilation, shape=(1, None, 11, 70))
    cand = check(src, ["depthwise_convolution"], {"ROLL": roll, "UNROLL": unroll, "BLOCK_W": 64, "vector": vector})
    assert cand.params["_depthwise_conv_0"]["ROLL"] == roll and "oh0 + ROLL" in cand.source


def test_the_pointwise_epilogue_is_applied_before_the_one_store():
    src = _conv_problem(6, 6, 6, 3, padding=1, tail="torch.relu(self.conv(x)) * 2.0 + 1.0")
    cand = check(src, ["depthwise_convolution", "kernel_fusion"])
    assert cand.applied == ["depthwise_convolution", "kernel_fusion"]
    assert cand.source.count("@triton.jit") == 1  # conv, bias, relu, scale and shift in one kernel


def test_a_channels_last_input_is_read_in_place_through_its_strides():
    src = _conv_problem(6, 6, 6, 3, padding=1, shape=(2, None, 7, 10))
    cand = build_candidate(src, ["depthwise_convolution"])
    ref_ns, new_ns = load(src), load(cand.source)
    torch.manual_seed(0)
    ref = ref_ns["Model"]()
    torch.manual_seed(0)
    new = new_ns["ModelNew"]()
    x = torch.randn(2, 6, 7, 10).contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        assert_close(ref(x), new(x))
    assert "x.contiguous()" not in cand.source  # no layout copy of the input


@pytest.mark.parametrize("dtype", ["torch.float16", "torch.bfloat16"])
def test_half_precision_within_its_tolerance(dtype):
    src = _conv_problem(4, 4, 4, 3, padding=1, dtype=f".to({dtype})")
    assert check(src, ["depthwise_convolution"]).applied == ["depthwise_convolution"]


def test_wide_groups_and_ordinary_convolutions_are_left_to_cudnn():
    wide = _conv_problem(16, 16, 2, 3)  # 8 input channels per group
    assert not applicable(wide, "depthwise_convolution").ok
    assert build_candidate(wide, ["depthwise_convolution"]).applied == []
    plain = _conv_problem(3, 5, 1, 3)
    assert "no conv2d module with groups > 1" in applicable(plain, "depthwise_convolution").reason
