"""gemm_epilogue_fusion: cuBLAS/cuDNN product + bias and epilogue in one Triton pass."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import build_candidate

LINEAR = '''class Model(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.fc = nn.Linear(i, o)
        self.scale = nn.Parameter(torch.randn(o))

    def forward(self, x):
        y = self.fc(x)
        return F.gelu(y) * self.scale + torch.sigmoid(y)
'''
CONV = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 5, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(5, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias
'''


@pytest.mark.parametrize("backend", ["cublas", "triton"])
def test_linear_epilogue(backend):
    cand = check(problem(LINEAR, "[torch.randn(5, 33)]", "[33, 37]"), ["gemm_epilogue_fusion"], {"gemm_backend": backend})
    assert cand.applied == ["gemm_epilogue_fusion"]
    assert [p["gemm_backend"] for k, p in cand.params.items() if k.startswith("_gemm")] == [backend]


def test_conv_bias_folded_into_epilogue():
    cand = check(problem(CONV, "[torch.randn(2, 3, 7, 9)]"), ["gemm_epilogue_fusion"])
    assert "None, (1, 1), (1, 1)" in cand.source  # conv called without its bias


def test_linear_3d_input():
    check(problem(LINEAR, "[torch.randn(2, 3, 17)]", "[17, 9]"), ["gemm_epilogue_fusion"])


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_triton_gemm_grouped_tiles(precision):
    """Several tile rows and columns, ragged edges, groups of 2 tile rows: every output tile visited once."""
    params = {"gemm_backend": "triton", "dot_precision": precision,
              "launch": {"_gemm_0": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}}}
    cand = check(problem(LINEAR, "[torch.randn(53, 40)]", "[40, 45]"), ["gemm_epilogue_fusion"], params)
    assert cand.params["_gemm_0"]["dot_precision"] == precision
    assert f'input_precision="{precision}"' in cand.source


def test_unknown_dot_precision_is_refused():
    with pytest.raises(ValueError, match="dot_precision"):
        check(problem(LINEAR, "[torch.randn(5, 33)]", "[33, 37]"), ["gemm_epilogue_fusion"],
              {"gemm_backend": "triton", "dot_precision": "fp8"})


def test_one_pass_tf32_dots_at_a_loose_tolerance():
    source = problem(LINEAR, "[torch.randn(5, 33)]", "[33, 37]")
    cand = build_candidate(source, ["gemm_epilogue_fusion"], {"gemm_backend": "triton", "dot_precision": "tf32"})
    assert 'input_precision="tf32"' in cand.source


@pytest.mark.parametrize("tail", ["y * torch.sigmoid(y)",                          # the product used twice
                                  "y * 0.5 + y.clone().detach()",                  # a residual through a copy
                                  "torch.multiply(torch.tanh(F.softplus(y)), y)"])  # Mish written out
@pytest.mark.parametrize("layer,shape", [("nn.Linear(24, 17)", "(9, 24)"), ("nn.Conv2d(3, 5, 3)", "(2, 3, 7, 8)")])
def test_an_epilogue_that_uses_the_product_twice_is_fused(tail, layer, shape):
    src = problem(f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.layer = {layer}\n\n"
                  f"    def forward(self, x):\n        y = self.layer(x)\n        return {tail}\n", f"[torch.randn{shape}]")
    cand = check(src, ["gemm_epilogue_fusion"])
    assert cand.applied == ["gemm_epilogue_fusion"] and cand.source.count("@triton.jit") == 1
    assert "self.layer(x)" not in cand.source.split("class ModelNew")[1]


def test_a_product_whose_uses_form_no_epilogue_is_not_reported_applied():
    src = problem("class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                  "        self.fc = nn.Linear(8, 6)\n\n"
                  "    def forward(self, x):\n        y = self.fc(x)\n        return torch.relu(y), y.sum(dim=1)\n",
                  "[torch.randn(4, 8)]")
    cand = build_candidate(src, ["gemm_epilogue_fusion"])
    assert cand.applied == [] and "@triton.jit" not in cand.source


CONV_CHAIN_NORM = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.norm = nn.GroupNorm(4, 8)

    def forward(self, x):
        return self.norm(torch.sigmoid(self.conv(x) * 2.0))
'''
LINEAR_SOFTMAX = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(33, 37)

    def forward(self, x):
        y = self.fc(x)
        return torch.softmax(F.gelu(y).view(5, 37), dim=1){tail}
'''
ADOPTING = ["gemm_epilogue_fusion", "fused_normalization", "online_softmax", "kernel_fusion"]


@pytest.mark.parametrize("source", [problem(CONV_CHAIN_NORM, "[torch.randn(2, 3, 9, 9)]"),
                                    problem(LINEAR_SOFTMAX.format(tail=""), "[torch.randn(5, 33)]")])
def test_a_row_region_reads_the_raw_product(source):
    """The product's only reader is a norm or softmax: cuDNN/cuBLAS computes it without its bias and the
    region's kernel adds the bias and the chain as it reads, so no epilogue pass writes it in between."""
    cand = check(source, ADOPTING)
    assert cand.source.count("_kernel[") == 1, cand.source
    assert "None, (1, 1)" in cand.source or "functional.linear(x, fc_weight)" in cand.source
    assert "kernel_fusion" in cand.applied and "gemm_epilogue_fusion" not in cand.applied  # no product pass left


def test_a_norm_reads_a_biased_convolution_raw_without_kernel_fusion():
    """Conv -> GroupNorm: the norm adds the convolution's bias as it reads, saving the bias pass."""
    src = problem(CONV_CHAIN_NORM.replace("torch.sigmoid(self.conv(x) * 2.0)", "self.conv(x)"),
                  "[torch.randn(2, 3, 9, 9)]")
    cand = check(src, ["fused_normalization"])
    assert cand.applied == ["fused_normalization"] and "None, (1, 1)" in cand.source


def test_a_product_read_twice_or_on_a_triton_gemm_is_not_adopted():
    twice = problem(LINEAR_SOFTMAX.format(tail=" + y"), "[torch.randn(5, 33)]")
    assert "the bias is added as this kernel reads it" not in check(twice, ADOPTING).source
    once = problem(LINEAR_SOFTMAX.format(tail=""), "[torch.randn(5, 33)]")
    triton = check(once, ADOPTING, {"gemm_backend": "triton"})
    assert "the bias is added as this kernel reads it" not in triton.source and "tl.dot" in triton.source
