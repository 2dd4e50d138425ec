"""One recipe per Technique id: when it applies, which regions it claims, what it switches on.

Every recipe has the same four hooks, called by the builder in fixed phases:
`applicable(graph)` (cheap and static), `rewrite(ctx)` (graph rewrites), `claim(ctx)` (anchor
regions that become Triton kernels) and `configure(ctx)` (framework-level switches).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.regions import Region, is_pointwise
from kskill.agents.recipes import analysis


@dataclass(frozen=True)
class Applicability:
    """Whether a technique can be applied to a reference, and why (not)."""

    ok: bool
    reason: str


class Recipe:
    """Base recipe: applies nowhere, changes nothing."""

    id = ""
    summary = ""

    def applicable(self, graph: Graph, rtol: float = 1e-4) -> Applicability:
        """`rtol`: the run's relative tolerance, for recipes whose error depends on it."""
        sites = self.sites(graph)
        if sites:
            return Applicability(True, f"{len(sites)} site(s): {', '.join(sites[:6])}")
        return Applicability(False, self.absent_reason())

    def sites(self, graph: Graph) -> list[str]:
        return []

    def absent_reason(self) -> str:
        return "nothing in the reference this technique applies to"

    def rewrite(self, ctx: Any) -> None:
        return None

    def claim(self, ctx: Any) -> None:
        return None

    def configure(self, ctx: Any) -> None:
        return None


class AnchorRecipe(Recipe):
    """A recipe that turns matching nodes into Triton regions of one kind."""

    kind = ""

    def match(self, node: Node, graph: Graph) -> Region | None:
        raise NotImplementedError

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if self.match(n, graph) is not None]

    def claim(self, ctx: Any) -> None:
        taken = ctx.claimed()
        for node in ctx.graph.nodes:
            if node.name in taken:
                continue
            region = self.match(node, ctx.graph)
            if region is not None and not (region.names() & taken):
                ctx.regions.append(region)
                taken |= region.names()
                ctx.mark(self.id)


class KernelFusion(Recipe):
    id = "kernel_fusion"
    summary = "fuse chains of pointwise ops (and prologues/epilogues of Triton regions) into one kernel"

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if is_pointwise(n, graph)]

    def absent_reason(self) -> str:
        return "no fusible pointwise op (float dtype, broadcastable operands) in the reference"


class GemmEpilogueFusion(AnchorRecipe):
    id = "gemm_epilogue_fusion"
    summary = "GEMM/convolution on cuBLAS/cuDNN + bias and the pointwise epilogue in one Triton pass"
    kind = "gemm"

    def match(self, node: Node, graph: Graph) -> Region | None:
        return analysis.gemm_region(node, graph)

    def absent_reason(self) -> str:
        return "no linear/matmul/conv followed by pointwise ops (or a conv bias) in the reference"


class OnlineSoftmax(AnchorRecipe):
    id = "online_softmax"
    summary = "softmax / log-softmax in one read: running max and normaliser, then one write"
    kind = "softmax"

    def match(self, node: Node, graph: Graph) -> Region | None:
        return analysis.softmax_region(node, graph)

    def absent_reason(self) -> str:
        return "no softmax or log_softmax over a float tensor"


class FusedNormalization(AnchorRecipe):
    id = "fused_normalization"
    summary = "layer/group/instance/batch norm (batch statistics in training mode) as Triton kernels"
    kind = "norm"

    def match(self, node: Node, graph: Graph) -> Region | None:
        return analysis.norm_region(node, graph)

    def absent_reason(self) -> str:
        return "no layer/group/instance/batch norm with supported settings"


class TritonReduction(AnchorRecipe):
    id = "triton_reduction"
    summary = "sum/mean/max/min/amax/amin/argmax/argmin/prod over contiguous dims, split when rows are few"
    kind = "reduce"

    def match(self, node: Node, graph: Graph) -> Region | None:
        return analysis.reduce_region(node, graph)

    def absent_reason(self) -> str:
        return "no reduction over a contiguous range of dimensions"


class FusedScan(AnchorRecipe):
    id = "fused_scan"
    summary = "cumsum / cumprod as a blocked associative scan with a running carry"
    kind = "scan"

    def match(self, node: Node, graph: Graph) -> Region | None:
        return analysis.scan_region(node, graph)

    def absent_reason(self) -> str:
        return "no cumsum / cumprod"


class FusedPooling(AnchorRecipe):
    id = "fused_pooling"
    summary = "max / average pooling (2-d, 1-d) with the producer's pointwise ops folded into the loads"
    kind = "pool"

    def match(self, node: Node, graph: Graph) -> Region | None:
        return analysis.pool_region(node, graph)

    def absent_reason(self) -> str:
        return "no max/avg pooling with supported settings (no dilation, ceil_mode or indices)"


class FusedLoss(AnchorRecipe):
    id = "fused_loss"
    summary = "losses (mse, l1, smooth-l1, huber, kl-div, cross-entropy) in one pass with the reduction"
    kind = "loss"

    def match(self, node: Node, graph: Graph) -> Region | None:
        return analysis.loss_region(node, graph)

    def absent_reason(self) -> str:
        return "no supported loss function call"


class FlashAttention(AnchorRecipe):
    id = "flash_attention"
    summary = "scaled dot-product attention as one tiled kernel with online softmax (no S x S matrix)"
    kind = "attention"

    def match(self, node: Node, graph: Graph) -> Region | None:
        return analysis.attention_region(node, graph)

    def absent_reason(self) -> str:
        return "no scaled_dot_product_attention call nor matmul-softmax-matmul pattern without mask/dropout"


class CudaGraph(Recipe):
    id = "cuda_graph"
    summary = "capture the whole forward as one CUDA graph on static buffers (removes launch overhead)"

    def applicable(self, graph: Graph, rtol: float = 1e-4) -> Applicability:
        blocker = analysis.graph_capture_blocker(graph)
        if blocker:
            return Applicability(False, blocker)
        return Applicability(True, f"{sum(1 for n in graph.nodes if n.op != 'input')} ops per forward "
                                   "would replay as one graph launch")

    def configure(self, ctx: Any) -> None:
        if analysis.graph_capture_blocker(ctx.graph) is None:
            ctx.flags["cuda_graph"] = True
            ctx.mark(self.id)


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


class Tf32TensorCores(Recipe):
    id = "tf32_tensor_cores"
    summary = "TF32 tensor cores for matmuls whose error analysis fits the tolerance"

    def applicable(self, graph: Graph, rtol: float = 1e-4) -> Applicability:
        verdicts = analysis.tf32_verdicts(graph, rtol)
        if not verdicts:
            return Applicability(False, "no fp32 matmul / linear")
        ok = [n for n, (fits, _) in verdicts.items() if fits]
        if ok:
            return Applicability(True, f"TF32 error fits rtol={rtol} for {', '.join(ok)}")
        return Applicability(False, "; ".join(reason for _, reason in verdicts.values()))

    def configure(self, ctx: Any) -> None:
        rtol = float(ctx.params.get("rtol", 1e-4))
        verdicts = analysis.tf32_verdicts(ctx.graph, rtol)
        owned = ctx.claimed()
        nodes = {n for n, (fits, _) in verdicts.items() if fits and n not in owned}
        for name, (fits, reason) in verdicts.items():
            if not fits:
                ctx.notes.append(f"tf32 declined for {name}: {reason}")
        if nodes:
            ctx.flags["tf32_nodes"] = nodes
            ctx.mark(self.id)


class AlgebraicSimplification(Recipe):
    id = "algebraic_simplification"
    summary = "diag(d) @ A as a row scale, A @ diag(d) as a column scale, redundant transposes and copies"

    def sites(self, graph: Graph) -> list[str]:
        from kskill.agents.recipes.simplify import find_simplifications
        return [s for s, _ in find_simplifications(graph)]

    def absent_reason(self) -> str:
        return "no diagonal product, double transpose, identity op or redundant copy"

    def rewrite(self, ctx: Any) -> None:
        from kskill.agents.recipes.simplify import simplify
        done = simplify(ctx.graph)
        if done:
            ctx.notes.extend(f"simplified: {d}" for d in done)
            ctx.mark(self.id)


class AutotuneLaunch(Recipe):
    id = "autotune_launch"
    summary = "fused pointwise kernels carry a small triton.autotune sweep timed on the GPU"

    def sites(self, graph: Graph) -> list[str]:
        return [n.name for n in graph.nodes if is_pointwise(n, graph) or n.op in analysis.ROW_OPS]

    def absent_reason(self) -> str:
        return "no pointwise or row kernel to tune"

    def configure(self, ctx: Any) -> None:
        if any(r.kind == "pointwise" for r in ctx.regions):
            ctx.flags["autotune"] = True
            ctx.mark(self.id)


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


RECIPES: dict[str, Recipe] = {r.id: r for r in (
    KernelFusion(), GemmEpilogueFusion(), OnlineSoftmax(), FusedNormalization(), TritonReduction(),
    CudaGraph(), ChannelsLast(), Tf32TensorCores(), AlgebraicSimplification(), FlashAttention(),
    AutotuneLaunch(), VectorizedAccess(), FusedScan(), FusedPooling(), FusedLoss(),
)}
