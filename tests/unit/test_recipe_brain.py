"""The recipe brain's interface: seed, determinism, suite capture, applicability, errors."""

from pathlib import Path

import pytest
from recipe_support import check, problem

from kskill.agents.recipes import RECIPES, RecipeNotApplicable, applicable, build_candidate
from kskill.agents.recipes.capture import capture
from kskill.graph_schema.errors import KskillError

SUITE = sorted((Path(__file__).parents[2] / "eval" / "problems").glob("[0-9]*.py"))
SHARED = {"kernel_fusion", "gemm_epilogue_fusion", "online_softmax", "fused_normalization", "triton_reduction",
          "cuda_graph", "channels_last", "tf32_tensor_cores", "algebraic_simplification", "flash_attention",
          "autotune_launch", "vectorized_access", "fused_scan", "fused_pooling", "fused_loss"}


def test_recipes_cover_the_shared_technique_ids():
    assert set(RECIPES) == SHARED


def test_suite_has_30_problems_that_all_capture():
    assert len(SUITE) >= 30
    for path in SUITE:
        graph = capture(path.read_text())
        assert graph.nodes, path.name


def test_seed_is_faithful_and_deterministic():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x).sum(dim=1)\n", "[torch.randn(3, 5)]")
    first = check(src, [])
    assert first.applied == [] and "@triton.jit" not in first.source
    assert build_candidate(src, []).source == first.source
    again = build_candidate(src, ["kernel_fusion", "triton_reduction"])
    assert again.source == build_candidate(src, ["kernel_fusion", "triton_reduction"]).source


def test_unknown_technique_is_a_clear_error():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return x\n", "[torch.randn(3)]")
    with pytest.raises(RecipeNotApplicable, match="unknown technique"):
        build_candidate(src, ["warp_magic"])
    assert issubclass(RecipeNotApplicable, KskillError)
    assert not applicable(src, "warp_magic").ok


def test_broken_reference_is_reported():
    with pytest.raises(RecipeNotApplicable, match="Model"):
        build_candidate("import torch\n", [])


def test_generated_shape_check():
    src = problem("class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n", "[torch.randn(3, 5)]")
    from recipe_support import load
    import torch
    ns = load(build_candidate(src, ["kernel_fusion"]).source)
    with pytest.raises(ValueError, match="generated for x of shape"):
        ns["ModelNew"]()(torch.randn(4, 5))
