"""channels_last: channels-last memory format for 2-d and 3-d convolutions (plain and transposed).

A convolution with an epilogue (its bias, pointwise ops after it) becomes a region as in
gemm_epilogue_fusion: cuDNN runs on channels-last input and weight (NHWC, or NDHWC for 3-d), which
selects its faster kernels, without its bias, and the fused epilogue walks the output in that
memory order so every access stays contiguous. A convolution with nothing after it only gets its
input and weight in channels-last (cuDNN picks its kernels by both) and returns its output so: the
values are the same, the strides differ. A PyTorch op after either that does not keep the layout
(a `.view`, a group norm; see LAYOUT_KEEPING) gets the output in NCHW first.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import AnchorRecipe
from kskill.agents.recipes.fused_normalization import channels_last_norm
from kskill.agents.recipes.fused_pooling import channels_last_pool
from kskill.agents.recipes.online_softmax import channels_last_softmax
from kskill.agents.recipes.gemm_epilogue_fusion import CHANNELS_LAST_OPS, gemm_region, product_text
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.regions import is_pointwise
from kskill.agents.recipes.templates.common import MEMORY_FORMATS, to_channels_last
from kskill.agents.recipes.triton_reduction import channels_last_view


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
        graph = ctx.graph
        regions = [r for r in ctx.regions if r.kind == "gemm" and r.anchor.op in CHANNELS_LAST_OPS]
        claimed = ctx.claimed()
        overrides = ctx.flags.setdefault("code_override", {})
        for region in regions:
            outputs = region.epilogue.outputs if region.epilogue else [region.extra.get("output", region.anchor.name)]
            region.extra["contiguous_outputs"] = {o for o in outputs if _needs_contiguous(o, graph, claimed)}
        # a batch norm that took its convolution over runs it in channels-last too, and reads the result as it
        # lies; so do a reduction, a pooling, a softmax over the channels and a group norm that adopted their
        # convolution's product
        reads = (channels_last_view, channels_last_pool, channels_last_softmax, channels_last_norm)
        adopted = [r for r in ctx.regions if getattr(r.extra.get("conv"), "op", None) in CHANNELS_LAST_OPS
                   or any(read(r, graph) is not None for read in reads)]
        if regions or adopted:
            ctx.flags["nhwc"] = True
            ctx.notes.append("channels_last: the layout can change cuDNN's algorithm; where cuDNN computes in "
                             "TF32 (PyTorch's default) results may then differ from the NCHW reference by TF32 "
                             "rounding, which the correctness trials judge")
        alone = [n for n in graph.nodes if n.name not in claimed and _alone(n)]
        for node in alone:
            fmt = f"contiguous(memory_format={MEMORY_FORMATS[len(node.shape)]})"
            bias = Attr(f"{node.module}.bias").code if node.attrs.get("has_bias") else "None"
            text = product_text(node, to_channels_last(node.args[0].name), f"{Attr(f'{node.module}.weight').code}.{fmt}", bias)
            overrides[node.name] = text + (".contiguous()" if _needs_contiguous(node.name, graph, claimed) else "")
        if regions or alone or adopted:
            ctx.mark(self.id)


# Ops whose kernels take channels-last tensors as they are (or are fused into kskill's own kernels,
# which read any layout). Any other op after a channels-last convolution (a view, which needs
# contiguous memory; a group norm, whose kernel is slow on it) gets the output in NCHW first.
LAYOUT_KEEPING = frozenset(CHANNELS_LAST_OPS) | {"batch_norm", "avg_pool2d", "avg_pool3d", "max_pool2d",
                                                 "max_pool3d", "adaptive_avg_pool2d", "adaptive_avg_pool3d"}


def _needs_contiguous(name: str, graph: Graph, claimed: set[str]) -> bool:
    """Whether a channels-last result feeds a PyTorch op outside LAYOUT_KEEPING."""
    consumers = [graph.by_name[u] for u in graph.users(name) if u in graph.by_name and u not in claimed]
    return any(c.op not in LAYOUT_KEEPING and not is_pointwise(c, graph) for c in consumers)


def _alone(node: Node) -> bool:
    """A convolution module called on one input: converting its input and weight is all it needs."""
    return (node.op in CHANNELS_LAST_OPS and node.module is not None and len(node.args) == 1
            and isinstance(node.args[0], Ref) and len(node.shape) in MEMORY_FORMATS)


RECIPE = ChannelsLast()
