"""The one registry of recipes: technique id -> recipe, in the order the builder lets them claim
regions, and region kind -> the template that lowers it.

Each technique is one module of this package (its matcher, template and parameters); this list is
the only place that names them all. A technique of the skill base whose `recipe` key is not here
is one only an LLM brain applies.
"""

from __future__ import annotations

from kskill.agents.recipes import (
    algebraic_simplification, autotune_launch, channels_last, cuda_graph, depthwise_convolution, flash_attention,
    fused_loss, fused_normalization, fused_pooling, fused_scan, gemm_epilogue_fusion, kernel_fusion, online_softmax,
    shared_memory_tiling, split_normalization, tf32_tensor_cores, triton_reduction, vectorized_access)
from kskill.agents.recipes.base import Recipe, Template

MODULES = (kernel_fusion, gemm_epilogue_fusion, shared_memory_tiling, online_softmax, fused_normalization, triton_reduction,
           cuda_graph, channels_last, tf32_tensor_cores, algebraic_simplification, flash_attention,
           autotune_launch, vectorized_access, fused_scan, fused_pooling, fused_loss, depthwise_convolution,
           split_normalization)

RECIPES: dict[str, Recipe] = {m.RECIPE.id: m.RECIPE for m in MODULES}

TEMPLATES: dict[str, Template] = {}
for _recipe in RECIPES.values():
    for _kind, _template in _recipe.templates.items():
        if _kind in TEMPLATES:
            raise RuntimeError(f"region kind {_kind!r} has two templates")
        TEMPLATES[_kind] = _template
