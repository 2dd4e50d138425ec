"""The deepest lineage the search can write for a problem, through the product's own pieces.

Starting from the recipe brain's seed, every technique of the skill base whose recipe the brain
can apply is added in turn (skipping one that conflicts with the lineage, as the Planner's
short-term memory would), each through `RecipeBrain.optimize` with the technique's recipe key;
then the stack is written once more in every variant the skill base authors for its techniques.
Those are the candidates the exhaustive search reaches on that lineage. CUDA graphs are left
out: on CPU tensors their forward is the plain forward. No side effects on import.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from kskill.agents.brains.base import CannotApply, Draft, OptimizeTask, SeedTask
from kskill.agents.brains.recipes import RecipeBrain
from kskill.graph_schema.model import Technique, Variant
from kskill.graph_schema.skillbase import read_builtin

# Anchor recipes claim regions in the order given, so the lineage applies them before the fusion
# and layout recipes that work around the regions (the order a plan ranks them in, roughly).
ORDER = ["algebraic_simplification", "flash_attention", "gemm_epilogue_fusion", "online_softmax",
         "fused_normalization", "triton_reduction", "fused_scan", "fused_pooling", "fused_loss", "kernel_fusion",
         "pointwise_kernel", "vectorized_access"]


@lru_cache(maxsize=1)
def skill_base() -> tuple[dict[str, Technique], dict[str, list[Variant]], dict[str, set[str]]]:
    """Techniques by id, their variants, and what each conflicts with."""
    payload = read_builtin().payload
    techniques = {n.id: n for n in payload.nodes.values() if isinstance(n, Technique)}
    variants: dict[str, list[Variant]] = {}
    conflicts: dict[str, set[str]] = {}
    for edge in payload.edges:
        if edge.rel == "HAS_VARIANT":
            variants.setdefault(edge.start, []).append(payload.get("Variant", edge.end))
        if edge.rel == "CONFLICTS_WITH":
            conflicts.setdefault(edge.start, set()).add(edge.end)
            conflicts.setdefault(edge.end, set()).add(edge.start)
    return techniques, variants, conflicts


def lineage_candidates(source: str) -> list[tuple[list[str], dict[str, Any]]]:
    """(recipes, params) of the deepest lineage and of each of its variants."""
    techniques, variants, conflicts = skill_base()
    brain = RecipeBrain()
    draft = brain.seed(SeedTask(source, "problem"))
    applied: list[str] = []
    for tid in ORDER:
        if conflicts.get(tid, set()) & set(applied):
            continue
        task = OptimizeTask(source, "problem", draft, tid, None, "", "", (), (), "", recipe=techniques[tid].recipe)
        try:
            draft = brain.optimize(task)
        except CannotApply:
            continue
        applied.append(tid)
    if not applied:
        return []
    stack = list(draft.techniques)
    out = [(stack, {})]
    for tid in applied:
        for variant in variants.get(tid, []):
            params = json.loads(variant.params)
            if params and (stack, params) not in out:
                out.append((stack, params))
    return out


def stack_draft(source: str, recipes: list[str], params: dict[str, Any]) -> Draft:
    """The candidate for these recipes and params, as the brain writes it."""
    return RecipeBrain()._build(source, tuple(recipes), params)
