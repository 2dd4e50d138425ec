"""channels_last: channels-last memory format for 2-d and 3-d convolutions (plain and transposed).

A convolution with an epilogue (its bias, pointwise ops after it) becomes a region as in
gemm_epilogue_fusion: cuDNN runs on channels-last input and weight (NHWC, or NDHWC for 3-d), which
selects its faster kernels, without its bias, and the fused epilogue walks the output in that memory
order so every access stays contiguous. A convolution with nothing after it only gets its input and weight
in channels-last (cuDNN picks its kernels by both), and returns its output so (the values are the
same; the strides differ). A `.view`
of such an output, which needs contiguous memory, gets a contiguous copy first.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import AnchorRecipe
from kskill.agents.recipes.gemm_epilogue_fusion import CHANNELS_LAST_OPS, gemm_region, product_text
from kskill.agents.recipes.graph import Graph, Node, Ref
from kskill.agents.recipes.templates.common import MEMORY_FORMATS


class ChannelsLast(AnchorRecipe):
    id = "channels_last"
    summary = "channels-last memory format for 2-d/3-d convolutions and their fused epilogues"

    def match(self, node: Node, graph: Graph) -> Any:
        return gemm_region(node, graph) if node.op in CHANNELS_LAST_OPS else None

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if _alone(n) or self.match(n, graph) is not None]

    def absent_reason(self) -> str:
        return "no 2-d or 3-d convolution module"

    def configure(self, ctx: Any) -> None:
        regions = [r for r in ctx.regions if r.kind == "gemm" and r.anchor.op in CHANNELS_LAST_OPS]
        claimed = ctx.claimed()
        overrides = ctx.flags.setdefault("code_override", {})
        channels_last = {r.extra.get("output", r.anchor.name) for r in regions}
        if regions:
            for r in regions:
                channels_last |= set(r.epilogue.outputs if r.epilogue else ())
            ctx.flags["nhwc"] = True
            ctx.notes.append("channels_last: the layout can change cuDNN's algorithm; where cuDNN computes in "
                             "TF32 (PyTorch's default) results may then differ from the NCHW reference by TF32 "
                             "rounding, which the correctness trials judge")
        for node in ctx.graph.nodes:
            if node.name not in claimed and _alone(node):
                fmt = f"contiguous(memory_format={MEMORY_FORMATS[len(node.shape)]})"
                bias = f"self.{node.module}.bias" if node.attrs.get("has_bias") else "None"
                overrides[node.name] = product_text(node, f"{node.args[0].name}.{fmt}",
                                                    f"self.{node.module}.weight.{fmt}", bias)
                channels_last.add(node.name)
        for node in ctx.graph.nodes:
            source = node.args[0].name if node.op == "view" and node.args and isinstance(node.args[0], Ref) else None
            if source in channels_last and node.code.startswith(f"{source}.view("):
                overrides[node.name] = f"{source}.contiguous(){node.code[len(source):]}"
        if channels_last:
            ctx.mark(self.id)


def _alone(node: Node) -> bool:
    """A convolution module called on one input, which only needs its input converted."""
    return (node.op in CHANNELS_LAST_OPS and node.module is not None and len(node.args) == 1
            and isinstance(node.args[0], Ref) and len(node.shape) in MEMORY_FORMATS)


RECIPE = ChannelsLast()
