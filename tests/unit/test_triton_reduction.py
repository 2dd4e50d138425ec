"""triton_reduction: reductions over any contiguous dims, split and unsplit."""

import pytest
from recipe_support import check, problem


@pytest.mark.parametrize("expr, shape", [
    ("torch.sum(x, dim=1, keepdim=True)", (3, 37, 5)), ("x.mean(dim=-1)", (5, 129)),
    ("torch.max(x, dim=1)[0]", (3, 37, 5)), ("torch.argmax(x, dim=1)", (3, 37)), ("torch.argmin(x, dim=0)", (37, 3)),
    ("torch.amin(x, dim=0)", (37, 5)), ("torch.prod(x * 0.1 + 1.0, dim=1)", (3, 37)), ("torch.sum(x)", (7, 37)),
    ("torch.mean(x, dim=(1, 2))", (3, 5, 7, 2)), ("torch.logsumexp(x, dim=1, keepdim=True)", (3, 37, 5)),
    ("torch.logsumexp(x * 60.0, dim=-1)", (5, 129)),
])
def test_reductions(expr, shape):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return {expr}\n", f"[torch.randn{shape}]")
    cand = check(src, ["triton_reduction", "kernel_fusion"])
    assert "triton_reduction" in cand.applied


@pytest.mark.parametrize("split", [2, 5])
def test_split_reduction_with_prologue(split):
    src = problem("class Model(nn.Module):\n    def forward(self, a, b):\n        return torch.mean((a - b) ** 2)\n",
                  "[torch.randn(3, 301), torch.randn(3, 301)]")
    cand = check(src, ["triton_reduction", "kernel_fusion"], {"launch": {"_reduce_0": {"SPLIT": split, "BLOCK_R": 64}}})
    assert cand.params["_reduce_0"]["SPLIT"] == split and "_partial" in cand.source


@pytest.mark.parametrize("expr, shape", [("torch.argmin(x, dim=-1)", (4, 301)), ("torch.argmax(x, dim=1)", (3, 97, 6))])
def test_arg_reductions_pick_the_first_of_tied_values_across_blocks(expr, shape):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x):\n        return {expr}\n",
                  f"[torch.randint(0, 3, {shape}).float()]")
    cand = check(src, ["triton_reduction"], {"launch": {"_reduce_0": {"BLOCK_R": 16}}}, trials=3)
    assert "tl.int32" in cand.source


def test_logsumexp_is_one_online_pass_and_exact_where_lanes_see_only_minus_infinity():
    """Rows longer than the tile, with -inf entries (a row of only -inf gives -inf, as PyTorch's does):
    the running maximum and sum per lane must never compute inf - inf."""
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n"
                  "        x = x.masked_fill(x > 0.5, float('-inf'))\n"
                  "        x = torch.cat([x, torch.full_like(x[:1], float('-inf'))])\n"
                  "        return torch.logsumexp(x, dim=1)\n", "[torch.randn(4, 300)]")
    cand = check(src, ["triton_reduction"], {"launch": {"_reduce_0": {"BLOCK_R": 32}}})
    assert cand.applied == ["triton_reduction"] and cand.source.count("tl.exp(") == 3


def test_short_rows_are_reduced_many_to_a_program():
    """300 rows of 24 values: 128 whole rows per program, not a program per 96 bytes."""
    model = "class Model(nn.Module):\n    def forward(self, x):\n        return torch.amin(torch.relu(x), dim=-1)\n"
    src = problem(model, "[torch.randn(300, 24)]")
    cand = check(src, ["triton_reduction", "kernel_fusion"])
    assert cand.params["_reduce_0"]["BLOCK_P"] == 128 and "[(3,)]" in cand.source


def test_a_reduction_whose_output_takes_a_broadcast_bias_indexes_it_per_row():
    """Global average pooling, then a per-channel bias fused into the reduction's store: the bias index
    is the row's channel ((p * Q + q) % C, the whole expression taken modulo C), for every row."""
    from kskill.agents.recipes.templates.common import broadcast_index

    assert broadcast_index((32, 1, 1), (16, 32, 1, 1), "pid_p * Q + qs") == "((pid_p * Q + qs) % 32)"
    model = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(6, 1, 1))

    def forward(self, x):
        x = torch.mean(x, dim=(2, 3), keepdim=True) + self.bias
        return torch.logsumexp(x, dim=1, keepdim=True) * 10.0
'''
    cand = check(problem(model, "[torch.randn(5, 6, 7, 9)]"), ["triton_reduction", "kernel_fusion"])
    assert cand.applied == ["triton_reduction", "kernel_fusion"]


def test_epilogue_through_a_reshape():
    """sum(x, dim).view(...) followed by pointwise work: the work runs on the reduced values in registers."""
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n"
                  "        s = torch.sum(x, dim=2).reshape(x.shape[0], -1)\n"
                  "        return torch.relu(s - 1.0)\n",
                  "[torch.randn(3, 4, 9)]")
    cand = check(src, ["triton_reduction", "kernel_fusion"])
    assert cand.source.count("_kernel[") == 1, cand.source
