"""The deepest lineage the search can write for a problem, through the product's own pieces, and the
suite's problems (eval/problems) at small sizes, where every candidate of it is checked: in Triton's
interpreter by the unit tests, under compute-sanitizer on a GPU by sanitizer_check.py.

Starting from the recipe brain's seed, every technique of the skill base whose recipe the brain
can apply is added in turn (skipping one that conflicts with the lineage, as the Planner's
short-term memory would), each through `RecipeBrain.optimize` with the technique's recipe key;
then the stack is written once more in every variant the skill base authors for its techniques.
Those are the candidates the exhaustive search reaches on that lineage. CUDA graphs are left
out: on CPU tensors their forward is the plain forward. No side effects on import.
"""

from __future__ import annotations

import ast
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from kskill.agents.brains.base import CannotApply, OptimizeTask, SeedTask
from kskill.agents.brains.recipes import RecipeBrain
from kskill.graph_schema.model import Technique, Variant
from kskill.graph_schema.skillbase import GraphPayload, read_builtin

SUITE = Path(__file__).parent / "problems"
# Each suite problem's module-level size constants, replaced by small odd ones (same code otherwise).
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
    "37_linear_reduced_sum": "batch_size = 5\nin_features = 29\nout_features = 23",
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


# Anchor recipes claim regions in the order given, so the lineage applies them before the fusion
# and layout recipes that work around the regions (the order a plan ranks them in, roughly).
ORDER = ["algebraic_simplification", "flash_attention", "gemm_epilogue_fusion", "online_softmax",
         "fused_normalization", "triton_reduction", "fused_scan", "fused_pooling", "fused_loss", "kernel_fusion",
         "pointwise_kernel", "vectorized_access"]


@lru_cache(maxsize=1)
def _builtin_payload() -> GraphPayload:
    return read_builtin().payload


@lru_cache(maxsize=1)
def skill_base() -> tuple[dict[str, Technique], dict[str, list[Variant]], dict[str, set[str]]]:
    """Techniques by id, their variants, and what each conflicts with."""
    payload = _builtin_payload()
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


@lru_cache(maxsize=1)
def _variant_tolerances() -> dict[str, float]:
    """Params (JSON text) of each variant whose conditions ask for a looser tolerance: the least rtol and
    atol those conditions admit (`rtol >= 0.005`: TF32 dots)."""
    payload = _builtin_payload()
    variants = {v.id: v for vs in skill_base()[1].values() for v in vs}
    loosest: dict[str, float] = {}
    for edge in payload.edges:
        if edge.rel == "REQUIRES" and edge.start in variants:
            condition = payload.get("Condition", edge.end)
            if condition.metric in ("rtol", "atol") and condition.op == ">=":
                params = variants[edge.start].params
                loosest[params] = max(loosest.get(params, 0.0), float(condition.value))
    return loosest


def required_tolerance(params: dict[str, Any], default: float) -> float:
    """The tolerance a candidate written with `params` is held to: `default`, or the looser one its variant's
    conditions require (the Planner never picks that variant at a tighter tolerance)."""
    return max(default, _variant_tolerances().get(json.dumps(params, sort_keys=True), 0.0))


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
