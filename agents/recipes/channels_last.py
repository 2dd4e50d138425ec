"""channels_last: NHWC memory format for convolutions and their fused epilogues.

The convolution's input and weight are converted to channels_last, cuDNN's preferred layout for
its tensor-core kernels, and the fused epilogue walks its flat domain in NHWC order so every access
stays contiguous.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import Recipe
from kskill.agents.recipes.graph import Graph


class ChannelsLast(Recipe):
    id = "channels_last"
    summary = "NHWC memory format for convolution stacks and their fused epilogues"

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if n.op == "conv2d"]

    def absent_reason(self) -> str:
        return "no 2-d convolution"

    def configure(self, ctx: Any) -> None:
        if any(r.kind == "gemm" and r.anchor.op == "conv2d" for r in ctx.regions):
            ctx.flags["nhwc"] = True
            ctx.mark(self.id)
            ctx.notes.append("channels_last: NHWC changes cuDNN's algorithm; with cuDNN TF32 on (PyTorch's "
                             "default) the result then differs from an NCHW reference by TF32 rounding (~1e-3 "
                             "relative), beyond fp32 1e-4 tolerances: use it with allow_tf32 off or looser tolerances")


RECIPE = ChannelsLast()
