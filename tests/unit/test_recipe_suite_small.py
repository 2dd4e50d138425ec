"""Every candidate the GPU benchmark builds for the suite, checked at small sizes in Triton's interpreter.

The suite's problems are GPU-sized; here each problem's module-level size constants are replaced
by small odd ones (same code otherwise), and every (techniques, params) variant that
eval/recipes_bench.py would time is built and compared with the reference over fresh inputs.
CUDA-graph variants are left out: on CPU tensors their forward is the plain forward checked here.
"""

import ast
from pathlib import Path

import pytest
from recipe_support import check

from kskill.eval.recipes_bench import variants

pytestmark = pytest.mark.slow  # every variant of 36 problems built and run in Triton's interpreter

SUITE = Path(__file__).parents[2] / "eval" / "problems"
SMALL = {
    "01_matmul_bias_relu": "batch_size = 5\nin_features = 33\nout_features = 37",
    "02_linear_gelu_scale_residual": "batch_size = 5\nfeatures = 35",
    "03_linear_swish_bias_groupnorm": "batch_size = 5\nin_features = 19\nout_features = 24\ngroups = 4",
    "04_conv2d_relu_bias_add": "batch_size = 2\ncin, cout, k = 3, 5, 3\nheight = width = 9",
    "05_conv2d_batchnorm_relu": "batch_size = 3\ncin, cout = 3, 5\nheight = width = 7",
    "06_conv2d_hardswish_maxpool": "batch_size = 2\ncin, cout = 3, 4\nheight = width = 10",
    "07_softmax_rows": "batch_size = 3\ndim = 53",
    "08_log_softmax_rows": "batch_size = 4\ndim = 41",
    "09_softmax_channels": "batch_size = 2\nchannels = 5\nheight = width = 3",
    "10_layernorm": "batch_size = 4\ndim = 37",
    "11_rmsnorm": "batch_size = 2\nfeatures = 5\ndim1 = dim2 = 3",
    "12_groupnorm": "batch_size = 2\nchannels = 6\ngroups = 3\nheight = width = 5",
    "13_instancenorm": "batch_size = 2\nchannels = 3\nheight = width = 5",
    "14_batchnorm_train": "batch_size = 3\nchannels = 4\nheight = width = 5",
    "15_sum_dim1": "batch_size = 2\ndim1 = 37\ndim2 = 5",
    "16_mean_lastdim": "batch_size = 3\ndim = 67",
    "17_max_dim": "batch_size = 2\ndim1 = 29\ndim2 = 7",
    "18_argmax_dim": "batch_size = 2\ndim1 = 31\ndim2 = 5",
    "19_argmin_lastdim": "batch_size = 3\ndim = 63",
    "20_min_dim0": "rows = 37\ncols = 9",
    "21_cumsum": "batch_size = 3\ndim = 45",
    "22_cumprod": "batch_size = 3\ndim = 29",
    "23_maxpool2d": "batch_size = 2\nchannels = 3\nheight = width = 9",
    "24_avgpool2d": "batch_size = 2\nchannels = 3\nheight = width = 8",
    "25_mse_loss": "batch_size = 5\ndim = 37",
    "26_cross_entropy": "batch_size = 6\nclasses = 37",
    "27_smooth_l1_loss": "batch_size = 5\ndim = 37",
    "28_kl_div": "batch_size = 5\nclasses = 37",
    "29_hinge_loss": "batch_size = 5\ndim = 37",
    "30_pointwise_chain": "batch_size = 5\ndim = 37",
    "31_diag_matmul": "n = 19\nm = 23",
    "32_attention": "batch_size = 1\nheads = 2\nseq = 37\nhead_dim = 16",
    "33_mlp_small": "batch_size = 5\ndims = [16, 24, 10]",
    "34_small_convnet": "batch_size = 2",
    "35_transformer_block_small": "batch_size = 2\nseq = 19\ndim = 32\nheads = 2",
    "36_gemm_scale_batchnorm1d": "batch_size = 6\nin_features = 19\nout_features = 13",
}


def shrink(source: str, sizes: str) -> str:
    """The problem with its module-level size assignments replaced by `sizes`."""
    tree = ast.parse(source)
    assigns = [n for n in tree.body if isinstance(n, ast.Assign)]
    lines = source.splitlines()
    first = assigns[0].lineno - 1
    drop = {i for n in assigns for i in range(n.lineno - 1, n.end_lineno)}
    kept = [line for i, line in enumerate(lines) if i not in drop]
    kept[first:first] = sizes.splitlines()
    return "\n".join(kept) + "\n"


def test_every_suite_problem_has_small_sizes():
    assert sorted(SMALL) == sorted(p.stem for p in SUITE.glob("[0-9]*.py"))


@pytest.mark.parametrize("stem", sorted(SMALL))
def test_benchmarked_candidates_are_correct_at_small_sizes(stem):
    source = shrink((SUITE / f"{stem}.py").read_text(), SMALL[stem])
    built = [(t, p) for t, p in variants(source, sweep=False) if "cuda_graph" not in t]
    for techniques, params in built:
        check(source, techniques, params)
    assert built or stem in ("34_small_convnet",), f"{stem}: no Triton variant is benchmarked"
