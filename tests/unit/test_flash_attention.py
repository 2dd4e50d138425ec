"""flash_attention: SDPA calls and the matmul-softmax-matmul pattern."""

import pytest
from recipe_support import check, problem


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa(causal):
    src = problem(f"class Model(nn.Module):\n    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v, is_causal={causal})\n",
                  "[torch.randn(1, 2, 37, 16) for _ in range(3)]")
    assert check(src, ["flash_attention"], {"launch": {"_attention_0": {"BLOCK_M": 16, "BLOCK_N": 16}}}).applied == ["flash_attention"]


def test_pattern():
    model = '''class Model(nn.Module):
    def forward(self, q, k, v):
        s = torch.matmul(q, k.transpose(-2, -1)) * 0.25
        return torch.matmul(torch.softmax(s, dim=-1), v)
'''
    cand = check(problem(model, "[torch.randn(2, 1, 21, 16) for _ in range(3)]"), ["flash_attention"])
    assert cand.applied == ["flash_attention"] and "softmax(" not in cand.source.split("class ModelNew")[1]


def test_tensor_core_precision_with_ragged_tiles():
    src = problem("class Model(nn.Module):\n    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v)\n",
                  "[torch.randn(2, 2, 45, 16) for _ in range(3)]")
    cand = check(src, ["flash_attention"], {"dot_precision": "tf32x3",
                                            "launch": {"_attention_0": {"BLOCK_M": 16, "BLOCK_N": 32}}})
    assert cand.params["_attention_0"]["dot_precision"] == "tf32x3" and "PRECISION='tf32x3'" in cand.source
