"""fused_loss: losses computed and reduced in one pass."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import applicable


@pytest.mark.parametrize("call", ["F.mse_loss(a, b)", "F.l1_loss(a, b, reduction='sum')", "F.smooth_l1_loss(a, b, beta=0.5)",
                                  "F.huber_loss(a, b, delta=0.7)", "F.kl_div(torch.log(a.softmax(-1)), b.softmax(-1), reduction='batchmean')"])
def test_elementwise_losses(call):
    src = problem(f"class Model(nn.Module):\n    def forward(self, a, b):\n        return {call}\n",
                  "[torch.randn(5, 37), torch.randn(5, 37)]")
    assert "fused_loss" in check(src, ["fused_loss"]).applied


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy(reduction):
    src = problem(f"class Model(nn.Module):\n    def forward(self, x, t):\n        return F.cross_entropy(x, t, reduction='{reduction}')\n",
                  "[torch.randn(7, 37), torch.randint(0, 37, (7,))]")
    assert check(src, ["fused_loss"], {"launch": {"_loss_0": {"BLOCK_R": 16}}}).applied == ["fused_loss"]


def test_kl_div_reads_the_log_in_the_loss_kernel():
    src = problem("class Model(nn.Module):\n    def forward(self, p, q):\n"
                  "        return F.kl_div(torch.log(p), q, reduction='batchmean')\n",
                  "[torch.rand(6, 41) + 0.01, torch.randn(6, 41).softmax(-1)]")
    cand = check(src, ["fused_loss", "kernel_fusion"], {"launch": {"_loss_0": {"BLOCK": 32, "SPLIT": 3}}})
    assert cand.source.count("@triton.jit") == 2  # partial + sum: the log has no kernel of its own
    assert "tl.log(" in cand.source.split("_loss_0_partial")[1]


def test_scalar_op_after_a_loss_stays_outside_the_loss_kernel():
    src = problem("class Model(nn.Module):\n    def forward(self, a, b):\n        return F.mse_loss(a, b) * 3.0 + 1.0\n",
                  "[torch.randn(4, 33), torch.randn(4, 33)]")
    assert "fused_loss" in check(src, ["fused_loss", "kernel_fusion"]).applied


def _loss_problem(body: str, inputs: str, args: str = "a, b", init: str = "") -> str:
    model = "class Model(nn.Module):\n"
    if init:
        model += f"    def __init__(self):\n        super().__init__()\n        {init}\n"
    return problem(f"{model}    def forward(self, {args}):\n        return {body}\n", inputs)


@pytest.mark.parametrize("body,inputs", [
    ("torch.mean((a - b) ** 2)", "[torch.randn(5, 37), torch.randn(5, 37)]"),
    # a hinge loss written out, the targets broadcast along the last dim as in torch
    ("torch.mean(torch.clamp(1 - a * b, min=0))", "[torch.randn(6, 9), torch.randint(0, 2, (9,)).float() * 2 - 1]"),
    ("torch.sum(torch.abs(a - b) * 0.5)", "[torch.randn(3, 4, 11), torch.randn(3, 4, 11)]"),
])
def test_losses_written_out_are_one_pass_over_their_inputs(body, inputs):
    cand = check(_loss_problem(body, inputs), ["fused_loss"])
    assert cand.applied == ["fused_loss"]
    assert cand.source.count("@triton.jit") == 2  # the terms and their sum, then the fixed-order total
    assert "torch.mean" not in cand.source.split("class ModelNew")[1]


def test_a_mean_of_work_over_one_input_is_a_reduction_not_a_loss():
    src = _loss_problem("torch.mean(torch.relu(a) * 2.0)", "[torch.randn(4, 9)]", args="a")
    assert not applicable(src, "fused_loss").ok


def test_hinge_embedding_loss():
    src = _loss_problem("F.hinge_embedding_loss(a, b, margin=0.5)",
                        "[torch.randn(6, 13), torch.randint(0, 3, (6, 13)).float() - 1]")
    assert check(src, ["fused_loss"]).applied == ["fused_loss"]


@pytest.mark.parametrize("call", ["F.triplet_margin_loss(a, b, c, margin=0.7, swap=True)",
                                  "F.triplet_margin_loss(a, b, c, p=1, reduction='sum')",
                                  "self.loss(a, b, c)"])
def test_triplet_margin_loss_one_program_per_row(call):
    src = _loss_problem(call, "[torch.randn(7, 45), torch.randn(7, 45), torch.randn(7, 45)]", args="a, b, c",
                        init="self.loss = nn.TripletMarginLoss(margin=1.5)")
    cand = check(src, ["fused_loss"], {"launch": {"_row_loss_0": {"BLOCK_D": 16}}})
    assert cand.applied == ["fused_loss"] and "_row_loss_0_rows" in cand.source


def test_triplet_margin_loss_in_bfloat16():
    src = _loss_problem("F.triplet_margin_loss(a, b, c)",
                        "[torch.randn(5, 33, dtype=torch.bfloat16) for _ in range(3)]", args="a, b, c")
    assert check(src, ["fused_loss"]).applied == ["fused_loss"]


def test_cosine_embedding_loss():
    src = _loss_problem("F.cosine_embedding_loss(a, b, y, margin=0.1)",
                        "[torch.randn(8, 21), torch.randn(8, 21), torch.randint(0, 2, (8,)).float() * 2 - 1]",
                        args="a, b, y")
    assert check(src, ["fused_loss"]).applied == ["fused_loss"]


@pytest.mark.parametrize("body", ["torch.mean(1 - F.cosine_similarity(a, b, dim=1))",
                                  "torch.sum(F.pairwise_distance(a, b) * 0.5)"])
def test_a_mean_over_similarity_rows_is_one_row_loss(body):
    cand = check(_loss_problem(body, "[torch.randn(9, 70), torch.randn(9, 70)]"), ["fused_loss"],
                 {"launch": {"_row_loss_0": {"BLOCK_D": 32}}})
    assert cand.applied == ["fused_loss"]
    assert cand.source.count("@triton.jit") == 2 and "cosine_similarity(" not in cand.source.split("class ModelNew")[1]
