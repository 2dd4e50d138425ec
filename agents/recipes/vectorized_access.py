"""vectorized_access: 16-byte contiguous accesses and larger blocks in memory-bound pointwise kernels.

A framework switch read by the pointwise and epilogue templates: contiguity hints
(`tl.max_contiguous(tl.multiple_of(...))`) and a larger BLOCK, so each thread moves 16 bytes
per instruction.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import Recipe
from kskill.agents.recipes.graph import Graph
from kskill.agents.recipes.regions import is_pointwise


class VectorizedAccess(Recipe):
    id = "vectorized_access"
    summary = "16-byte contiguous accesses and larger blocks in memory-bound pointwise kernels"

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if is_pointwise(n, graph)]

    def absent_reason(self) -> str:
        return "no pointwise kernel"

    def configure(self, ctx: Any) -> None:
        if any(r.kind in ("pointwise", "gemm") for r in ctx.regions):
            ctx.flags["vectorized"] = True
            ctx.mark(self.id)


RECIPE = VectorizedAccess()
