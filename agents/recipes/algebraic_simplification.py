"""algebraic_simplification: rewrites that remove work without changing results beyond rounding.

- `torch.diag(d) @ A` -> `d[:, None] * A` (an O(n^3) GEMM and an n x n matrix become one sweep);
  `A @ torch.diag(d)` -> `A * d`;
- `x.transpose(i, j).transpose(i, j)` (also `.t().t()`) -> `x`;
- `x * 1`, `x / 1`, `x + 0`, `x - 0` -> `x`;
- `torch.tril(A @ B)` / `torch.triu(A @ B)` -> a tiled Triton GEMM that computes only the tiles on
  the kept side of the diagonal (about half of them) and stores zeros elsewhere, with exact fp32 or
  3xTF32 dots (`dot_precision`, as the technique's variants choose).
Rewritten nodes keep their names, so later code refers to them unchanged.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import Lowering, Recipe
from kskill.agents.recipes.gemm_epilogue_fusion import ACC, triton_gemm
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import is_float
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import Body
from kskill.agents.recipes.templates.unit import KernelUnit


def _diag_source(graph: Graph, operand: object) -> Node | None:
    if not isinstance(operand, Ref):
        return None
    node = graph.by_name[operand.name]
    if node.op != "diag" or node.attrs.get("diagonal", 0) != 0:
        return None
    src = node.args[0] if node.args else node.attrs.get("input")
    shape = graph.shape_of(src)
    return node if shape is not None and len(shape) == 1 else None


def find_simplifications(graph: Graph) -> list[tuple[str, str]]:
    """(node name, description) for every rewrite `simplify` would make."""
    found = []
    for node in graph.nodes:
        if node.op == "matmul" and len(node.args) == 2:
            a, b = node.args
            if _diag_source(graph, a) is not None and len(graph.shape_of(b) or ()) == 2:
                found.append((node.name, f"{node.name}: diag(d) @ A as a row scale"))
            elif _diag_source(graph, b) is not None and len(graph.shape_of(a) or ()) >= 2:
                found.append((node.name, f"{node.name}: A @ diag(d) as a column scale"))
        elif node.op in ("transpose", "t") and _inverse_transpose(graph, node) is not None:
            found.append((node.name, f"{node.name}: transpose of a transpose removed"))
        elif node.op in ("mul", "div", "add", "sub") and _neutral(node, graph):
            found.append((node.name, f"{node.name}: {node.op} by a neutral constant removed"))
    return found


def _inverse_transpose(graph: Graph, node: Node) -> Ref | None:
    inner = node.args[0] if node.args else node.attrs.get("input")
    if not isinstance(inner, Ref):
        return None
    prev = graph.by_name[inner.name]
    if prev.op != node.op:
        return None
    dims = lambda n: tuple(sorted(d % len(n.shape) for d in n.args[1:3])) if n.op == "transpose" else ()
    if dims(prev) != dims(node):
        return None
    src = prev.args[0] if prev.args else prev.attrs.get("input")
    return src if isinstance(src, Ref) else None


def _neutral(node: Node, graph: Graph) -> bool:
    if len(node.args) != 2 or not isinstance(node.args[0], (Ref, Attr)):
        return False
    const = node.args[1]
    if isinstance(const, bool) or not isinstance(const, (int, float)):
        return False
    neutral = 1 if node.op in ("mul", "div") else 0
    return const == neutral and graph.shape_of(node.args[0]) == node.shape \
        and graph.dtype_of(node.args[0]) == node.dtype


def simplify(graph: Graph) -> list[str]:
    """Apply every simplification in place; returns what was done."""
    done = []
    for name, description in find_simplifications(graph):
        node = graph.by_name[name]
        if node.op == "matmul":
            a, b = node.args
            diag_a = _diag_source(graph, a)
            if diag_a is not None:
                d = diag_a.args[0] if diag_a.args else diag_a.attrs["input"]
                n = graph.shape_of(d)[0]
                node.op, node.args = "mul", (d, b)
                node.attrs = {"arg_shapes": {0: (n, 1)}}
                node.code = f"{_text(d)}.unsqueeze(1) * {_text(b)}"
            else:
                diag_b = _diag_source(graph, b)
                d = diag_b.args[0] if diag_b.args else diag_b.attrs["input"]
                node.op, node.args, node.attrs = "mul", (a, d), {}
                node.code = f"{_text(a)} * {_text(d)}"
        else:
            src = _inverse_transpose(graph, node) if node.op in ("transpose", "t") else node.args[0]
            node.op, node.args, node.attrs = "identity", (src,), {}
            node.code = f"{_text(src)}"
        done.append(description)
    if done:
        graph.reindex()
        graph.drop_unused()  # the diag matrices, the inner transposes
    return done


def _text(operand: object) -> str:
    return operand.name if isinstance(operand, Ref) else operand.code  # type: ignore[union-attr]


def triangular_region(node: Node, graph: Graph) -> Region | None:
    """torch.tril / torch.triu of a 2-d float matmul whose only use is that mask."""
    if node.op not in ("tril", "triu") or not node.args or not isinstance(node.args[0], Ref):
        return None
    product = graph.by_name[node.args[0].name]
    if (product.op != "matmul" or not is_float(product) or len(product.shape or ()) != 2
            or graph.users(product.name) != [node.name] or graph.is_output(product.name)
            or any(not isinstance(a, (Ref, Attr)) or len(graph.shape_of(a) or ()) != 2 for a in product.args[:2])):
        return None
    diagonal = node.attrs.get("diagonal", node.args[1] if len(node.args) > 1 else 0)
    if not isinstance(diagonal, int):
        return None
    side = "lower" if node.op == "tril" else "upper"
    return Region("triangular_gemm", "algebraic_simplification", product,
                  extra={"output": node.name, "covers": [node.name], "epilogue_ok": False, "triangle": (side, diagonal)})


def lower_triangular(name: str, region: Region, how: Lowering) -> KernelUnit:
    product, mask = region.anchor, how.graph.by_name[region.extra["output"]]
    shape = tuple(product.shape)
    keep = Node(mask.name, "identity", (Ref(ACC),), {"arg_shapes": {0: shape}}, shape, mask.dtype)
    return triton_gemm(name, product, Body([keep], shape, [mask.name]), how.graph, how.params,
                       "algebraic_simplification", triangle=region.extra["triangle"])


class AlgebraicSimplification(Recipe):
    id = "algebraic_simplification"
    summary = ("diag(d) @ A as a row scale, A @ diag(d) as a column scale, redundant transposes and copies, "
               "tril/triu of a product computed on its kept side only")
    templates = {"triangular_gemm": lower_triangular}

    def sites(self, graph: Graph) -> list[str]:
        triangular = [n.name for n in graph.nodes if triangular_region(n, graph) is not None]
        return [s for s, _ in find_simplifications(graph)] + triangular

    def absent_reason(self) -> str:
        return "no diagonal product, double transpose, identity op, redundant copy or triangular product"

    def claim(self, ctx: Any) -> None:
        taken = ctx.claimed()
        for node in ctx.graph.nodes:
            region = triangular_region(node, ctx.graph)
            if region is not None and not (region.names() & taken):
                ctx.regions.append(region)
                taken |= region.names()
                ctx.notes.append(f"simplified: {node.name}: only the {region.extra['triangle'][0]} triangle "
                                 "of the product is computed")
                ctx.mark(self.id)

    def rewrite(self, ctx: Any) -> None:
        done = simplify(ctx.graph)
        if done:
            ctx.notes.extend(f"simplified: {d}" for d in done)
            ctx.mark(self.id)


RECIPE = AlgebraicSimplification()
