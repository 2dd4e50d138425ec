"""shared_memory_tiling: a lone linear / 2-d matmul as the tiled Triton GEMM, in the interpreter."""

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import applicable, build_candidate

MATMUL = '''class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)
'''
TRANSPOSED_BOTH = '''class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a.T, b.T)
'''
LINEAR = '''class Model(nn.Module):
    def __init__(self, i, o, bias):
        super().__init__()
        self.fc = nn.Linear(i, o, bias=bias)

    def forward(self, x):
        return self.fc(x)
'''
BATCHED = '''class Model(nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)
'''
# Small tiles so the interpreter visits several tile rows and columns with ragged edges.
SMALL = {"launch": {"_tiled_gemm_0": {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}}}
PRECISIONS = ["tf32x3", "ieee"]


def _tiled(source: str, precision: str):
    cand = check(source, ["shared_memory_tiling"], {"dot_precision": precision, **SMALL})
    assert cand.applied == ["shared_memory_tiling"]
    assert cand.params["_tiled_gemm_0"]["dot_precision"] == precision
    assert f'input_precision="{precision}"' in cand.source
    return cand


@pytest.mark.parametrize("precision", PRECISIONS)
def test_lone_matmul(precision):
    _tiled(problem(MATMUL, "[torch.randn(37, 29), torch.randn(29, 41)]"), precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_transposed_operands_read_in_place(precision):
    cand = _tiled(problem(TRANSPOSED_BOTH, "[torch.randn(29, 37), torch.randn(41, 29)]"), precision)
    assert ".contiguous()" not in cand.source  # the views are indexed through their strides


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("bias", [False, True])
def test_lone_linear(precision, bias):
    _tiled(problem(LINEAR, "[torch.randn(35, 33)]", f"[33, 37, {bias}]"), precision)


def test_default_tiles_are_the_tensor_core_ones():
    cand = build_candidate(problem(MATMUL, "[torch.randn(8, 8), torch.randn(8, 8)]"), ["shared_memory_tiling"],
                           {"dot_precision": "tf32x3"})
    assert (cand.params["_tiled_gemm_0"]["BLOCK_M"], cand.params["_tiled_gemm_0"]["BLOCK_N"]) == (128, 128)


def test_batched_matmul_declined_with_reason():
    source = problem(BATCHED, "[torch.randn(2, 5, 7), torch.randn(2, 7, 3)]")
    verdict = applicable(source, "shared_memory_tiling")
    assert not verdict.ok
    assert "3-d result" in verdict.reason
    cand = build_candidate(source, ["shared_memory_tiling"], {"dot_precision": "tf32x3"})
    assert cand.applied == [] and "tl.dot" not in cand.source
    assert any("shared_memory_tiling" in note for note in cand.notes)


def test_integer_matmul_declined_with_reason():
    verdict = applicable(problem(MATMUL, "[torch.ones(4, 4, dtype=torch.int64), torch.ones(4, 4, dtype=torch.int64)]"),
                         "shared_memory_tiling")
    assert not verdict.ok and "not a float product" in verdict.reason
