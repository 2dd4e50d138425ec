"""Lower a region to a kernel unit with the template of its kind and the params chosen for it.

Per-region params come from `params["launch"][<unit name>]` (as recorded by a previous build or
a sweep) on top of global params (e.g. `gemm_backend`), on top of each template's defaults.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.unit import KernelUnit


def region_params(name: str, ctx: Any) -> dict[str, Any]:
    params = {k: v for k, v in ctx.params.items() if k not in ("launch", "rtol")}
    params.update(ctx.params.get("launch", {}).get(name, {}))
    return params


def lower_region(name: str, region: Region, ctx: Any) -> KernelUnit:
    graph, params = ctx.graph, region_params(name, ctx)
    nhwc = bool(ctx.flags.get("nhwc"))
    vectorized = bool(ctx.flags.get("vectorized"))
    autotune = bool(ctx.flags.get("autotune"))
    kind = region.kind
    if kind == "pointwise":
        from kskill.agents.recipes.templates.pointwise import pointwise_unit
        return pointwise_unit(name, region.body, graph, params, vectorized=vectorized, autotune=autotune)
    if kind == "gemm":
        from kskill.agents.recipes.templates.gemm import gemm_unit
        use_nhwc = nhwc and region.anchor.op == "conv2d"
        return gemm_unit(name, region.anchor, region.epilogue, graph, params, nhwc=use_nhwc,
                         vectorized=vectorized)
    if kind == "reduce":
        from kskill.agents.recipes.templates.reduction import reduce_unit
        return reduce_unit(name, region, graph, params)
    if kind == "softmax":
        from kskill.agents.recipes.templates.softmax import softmax_unit
        return softmax_unit(name, region, graph, params, autotune=autotune)
    if kind == "norm":
        from kskill.agents.recipes.templates.norm import norm_unit
        return norm_unit(name, region, graph, params, autotune=autotune)
    if kind == "batch_norm":
        from kskill.agents.recipes.templates.batchnorm import batch_norm_unit
        return batch_norm_unit(name, region, graph, params)
    if kind == "scan":
        from kskill.agents.recipes.templates.scan import scan_unit
        return scan_unit(name, region, graph, params)
    if kind == "pool":
        from kskill.agents.recipes.templates.pooling import pool_unit
        return pool_unit(name, region, graph, params)
    if kind == "loss":
        from kskill.agents.recipes.templates.loss import loss_unit
        return loss_unit(name, region, graph, params)
    if kind == "attention":
        from kskill.agents.recipes.templates.attention import attention_unit
        return attention_unit(name, region, graph, params)
    raise ValueError(f"no template for region kind {kind!r}")
