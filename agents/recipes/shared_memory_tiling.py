"""shared_memory_tiling: a linear or 2-d matmul written as a tiled Triton GEMM.

Each program computes a BLOCK_M x BLOCK_N output tile, looping over K in BLOCK_K steps with
tl.dot (Triton stages the operand tiles in shared memory), tiles visited in groups of GROUP_M
rows for L2 reuse. The kernel is gemm_epilogue_fusion's Triton GEMM with no epilogue beyond the
bias; its dot precision ("tf32x3", "ieee", "tf32") and tile sizes are the technique's variants
in the skill base, gated there on the tolerance. What the template cannot take (a batched
matmul, a non-float product, a convolution) stays in PyTorch, and `applicable` says why.
"""

from __future__ import annotations

from kskill.agents.recipes.base import AnchorRecipe, Applicability, Lowering
from kskill.agents.recipes.gemm_epilogue_fusion import epilogue_body, triton_gemm
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import is_float
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.unit import KernelUnit


def tiled_gemm_region(node: Node, graph: Graph) -> Region | None:
    return None if decline_reason(node, graph) else Region("tiled_gemm", "shared_memory_tiling", node,
                                                            extra={"output": node.name})


def decline_reason(node: Node, graph: Graph) -> str:
    """Why the tiled GEMM template cannot compute this node ('' when it can)."""
    if node.op not in ("linear", "matmul"):
        return f"{node.op} is not a linear/matmul"
    if not is_float(node):
        return f"{node.op} {node.name} is {node.dtype}, not a float product"
    if len(node.shape) != 2:
        return f"{node.op} {node.name} gives a {len(node.shape)}-d result; the template tiles one 2-d product"
    if node.op == "linear" and node.module is None:
        return f"functional linear {node.name} keeps its own text"
    if node.op == "matmul":
        operands = node.args[:2]
        if len(operands) < 2 or not all(isinstance(x, (Ref, Attr)) for x in operands):
            return f"matmul {node.name} has an operand that is not a tensor of the graph"
        if any(len(graph.shape_of(x) or ()) != 2 for x in operands):
            return f"matmul {node.name} is not a product of two 2-d operands"
    return ""


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    body = epilogue_body(region.anchor, how.graph, region.epilogue)
    return triton_gemm(name, region.anchor, body, how.graph, how.params, region.technique)


class SharedMemoryTiling(AnchorRecipe):
    id = "shared_memory_tiling"
    summary = "a linear / 2-d matmul as a tiled Triton GEMM (tl.dot over shared-memory tiles)"
    templates = {"tiled_gemm": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return tiled_gemm_region(node, graph)

    def applicable(self, graph: Graph, rtol: float = 1e-4) -> Applicability:
        verdict = super().applicable(graph, rtol)
        if verdict.ok:
            return verdict
        why = [decline_reason(n, graph) for n in graph.nodes if n.op in ("linear", "matmul", "bmm", "conv1d",
                                                                          "conv2d", "conv3d")]
        return Applicability(False, "; ".join(why[:4]) or self.absent_reason())

    def absent_reason(self) -> str:
        return "no linear/matmul in the reference"


RECIPE = SharedMemoryTiling()
