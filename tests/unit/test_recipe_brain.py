"""The recipe brain's interface: seed, determinism, suite capture, applicability, errors."""

import copy
from pathlib import Path

import pytest
import torch
from recipe_support import check, problem

from kskill.agents.recipes import RECIPES, RecipeNotApplicable, applicable, build_candidate
from kskill.agents.recipes.capture import capture
from kskill.graph_schema.errors import KskillError

SUITE = sorted((Path(__file__).parents[2] / "eval" / "problems").glob("[0-9]*.py"))
def test_every_recipe_key_of_the_skill_base_is_a_recipe_and_every_recipe_a_technique():
    """The registry and the skill base agree: the brain writes every technique that names a recipe,
    and every recipe is the recipe of some technique (one list of ids, agents/recipes/registry.py)."""
    from kskill.graph_schema.model import Technique
    from kskill.graph_schema.skillbase import read_builtin

    keys = {n.recipe for n in read_builtin().payload.nodes.values() if isinstance(n, Technique) and n.recipe}
    assert keys == set(RECIPES)


def test_each_technique_is_one_module_with_its_test():
    """Liger-style layout: agents/recipes/<technique>.py and tests/unit/test_<technique>.py."""
    root = Path(__file__).parents[2]
    for technique in RECIPES:
        assert (root / "agents" / "recipes" / f"{technique}.py").is_file(), technique
        assert (root / "tests" / "unit" / f"test_{technique}.py").is_file(), technique


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


def test_indexed_submodules_are_looked_up_once():
    """A forward over nn.Sequential children reads them from a tuple bound on the first call (indexing
    a Sequential walks its children every time); a buffer indexed in the forward is left as it is."""
    src = problem("class Model(nn.Module):\n"
                  "    def __init__(self):\n        super().__init__()\n"
                  "        self.net = nn.Sequential(nn.Linear(6, 8), nn.Sequential(nn.ReLU(), nn.Linear(8, 4)))\n"
                  "        self.register_buffer('table', torch.randn(3, 4))\n"
                  "    def forward(self, x):\n        return self.net(x) + self.table[1]\n",
                  "[torch.randn(5, 6)]")
    cand = check(src, [])
    forward = cand.source.split("class ModelNew")[1]
    assert "self.net[" not in forward.split("def _kskill_bind")[0]
    assert "self.table" in forward  # not a module: read through the module each call
    namespace: dict = {}
    exec(compile(cand.source, "<generated>", "exec"), namespace)
    model = namespace["ModelNew"]()
    model(torch.randn(5, 6))
    assert model._kskill_modules[1] is model.net[0] and "_kskill_modules" not in dict(model.named_children())
    replica = copy.copy(model)  # shares the bound tuple, as DataParallel's replicas share a module's dict
    replica(torch.randn(5, 6))
    assert replica._kskill_modules[0] is replica and model._kskill_modules[0] is model


def test_a_causal_mask_sliced_by_a_size_is_captured():
    """`self.bias[:, :T, :T] == 0` with T read off x.size(): the slice bound is folded to its value and the
    comparison stays PyTorch code (the minGPT attention's mask)."""
    src = problem("class Model(nn.Module):\n"
                  "    def __init__(self):\n        super().__init__()\n"
                  "        self.register_buffer('bias', torch.tril(torch.ones(8, 8)).view(1, 8, 8))\n"
                  "        self.lin = nn.Linear(5, 5)\n"
                  "    def forward(self, x):\n        y = self.lin(x)\n        T = x.size(1)\n"
                  "        return torch.softmax(y.masked_fill(self.bias[:, :T, :T] == 0, float('-inf')), dim=-1)\n",
                  "[torch.randn(2, 5, 5)]")
    cand = check(src, ["online_softmax", "kernel_fusion"])
    assert "slice(None, 5, None)" in cand.source and "== 0" in cand.source
