"""flash_attention: SDPA calls and the matmul-softmax-matmul pattern."""

import pytest
from recipe_support import check, problem


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa(causal):
    src = problem(f"class Model(nn.Module):\n    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v, is_causal={causal})\n",
                  "[torch.randn(1, 2, 37, 16) for _ in range(3)]")
    assert check(src, ["flash_attention"], {"launch": {"_attention_0": {"BLOCK_M": 16, "BLOCK_N": 16}}}).applied == ["flash_attention"]


def test_sdpa_whose_operands_bear_each_others_names():
    src = problem("class Model(nn.Module):\n    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(k, q, v)\n",
                  "[torch.randn(1, 2, 11, 16), torch.randn(1, 2, 13, 16), torch.randn(1, 2, 11, 16)]")
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


MHA_BLOCK = '''class Model(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads)
        self.norm = nn.LayerNorm(embed_dim)

    def forward(self, x):
        B, C, H, W = x.shape
        x = x.view(B, C, H * W).permute(2, 0, 1)
        attn_output, _ = self.attn(x, x, x)
        x = self.norm(attn_output + x)
        return x.permute(1, 2, 0).view(B, C, H, W)
'''
SMALL_TILES = {"launch": {"_attention_0": {"BLOCK_M": 16, "BLOCK_N": 16}}}


@pytest.mark.parametrize("precision", ["ieee", "tf32x3"])
def test_multihead_self_attention_whose_weights_go_unused(precision):
    cand = check(problem(MHA_BLOCK, "[torch.rand(2, 32, 5, 7)]", "[32, 2]"), ["flash_attention"],
                 {**SMALL_TILES, "dot_precision": precision})
    body = cand.source.split("class ModelNew")[1]
    assert cand.applied == ["flash_attention"] and "self.attn(" not in body
    assert cand.source.count("F.linear(") == 2  # one packed input projection, one output projection


def test_multihead_cross_attention_batch_first_without_biases():
    model = '''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 2, bias=False, batch_first=True)

    def forward(self, x, memory):
        return self.attn(x, memory, memory, need_weights=False)[0] * 2.0
'''
    cand = check(problem(model, "[torch.randn(3, 9, 32), torch.randn(3, 13, 32)]"), ["flash_attention"], SMALL_TILES)
    assert cand.applied == ["flash_attention"]


@pytest.mark.parametrize("forward", [
    "out, w = self.attn(x, x, x)\n        return out + w.sum()",  # the weights are read
    "return self.attn(x, x, x, attn_mask=mask)[0]",
    "return self.attn(x, x, x, None, True, mask)[0]",  # the same mask, passed by position
    "return self.attn(x, x, x, key_padding_mask=mask[:3])[0]",
], ids=["weights-read", "mask", "mask-by-position", "padding-mask"])
def test_multihead_attention_that_is_not_plain_attention_is_left_alone(forward):
    model = f'''class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 2)

    def forward(self, x, mask):
        {forward}
'''
    cand = check(problem(model, "[torch.randn(9, 3, 32), torch.ones(9, 9, dtype=torch.bool).triu(1)]"), ["flash_attention"])
    assert cand.applied == []
