"""algebraic_simplification: rewrites that remove work without changing results beyond rounding.

- `torch.diag(d) @ A` -> `d[:, None] * A` (an O(n^3) GEMM and an n x n matrix become one sweep);
  `A @ torch.diag(d)` -> `A * d`;
- `x.transpose(i, j).transpose(i, j)` (also `.t().t()`) -> `x`;
- `x * 1`, `x / 1`, `x + 0`, `x - 0` -> `x`;
- a sum or mean over the output features of a linear map, through scalar factors and per-feature
  offsets (`(x @ W.T / 2 - c).sum(dim=-1)`) -> the same over a product with the weight's reduced
  rows (`x @ W.sum(0) / 2 - c.sum()`): a matrix-vector product, one read of the weight, in place of
  a GEMM of N times the work; an average pooling over those features in windows of k, the same with
  the rows averaged k by k (a GEMM of N / k columns);
- `torch.tril(A @ B)` / `torch.triu(A @ B)` -> a tiled Triton GEMM that computes only the tiles on
  the kept side of the diagonal (about half of them) and stores zeros elsewhere, with exact fp32 or
  3xTF32 dots (`dot_precision`, as the technique's variants choose).
Rewritten nodes keep their names, so later code refers to them unchanged.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from kskill.agents.recipes.base import Lowering, Recipe
from kskill.agents.recipes.gemm_epilogue_fusion import ACC, triton_gemm
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import arg, is_float, normalise_dims, pool_window
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
        elif (reduced := reduced_product(node, graph)) is not None:
            found.append((node.name, f"{node.name}: {node.op} over the features of {reduced.product.name} "
                          "as a product with the weight's reduced rows"))
    return found


class ReducedProduct(NamedTuple):
    reduction: Node  # the sum or mean over the last dim, or the average pooling over it
    product: Node  # nn.Linear, or a matmul by a 2-d operand
    chain: list[Node]  # the scalar factors and per-feature offsets between them, in order
    window: int  # features each output reduces: all of them, or the pooling's window


def reduced_product(node: Node, graph: Graph) -> ReducedProduct | None:
    """A float sum or mean over the last dim of a linear map's product (an nn.Linear, or `x @ B` with B 2-d),
    reached through multiplies and divides by numbers and additions of per-feature constants, or an average
    pooling over that dim in windows that do not overlap; each node the only use of the one before. By linearity
    the reduction moves onto the weight's rows (reduce_product_text)."""
    if node.op == "avg_pool1d":
        return _pooled_product(node, graph)
    if node.op not in ("sum", "mean") or not is_float(node) or node.attrs.get("dtype") is not None or not node.args:
        return None
    value, dims = node.args[0], arg(node, "dim", 1)
    shape = graph.shape_of(value)
    if not isinstance(value, Ref) or not shape or dims is None or normalise_dims(dims, len(shape)) != (len(shape) - 1,):
        return None
    chain: list[Node] = []
    current = graph.by_name[value.name]
    while (step := _affine_step(current, graph)) is not None:
        chain.append(current)
        current = graph.by_name[step[0].name]
    if not _linear_map(current, graph) or not _only_uses(graph, [current, *chain]):
        return None
    return ReducedProduct(node, current, chain[::-1], shape[-1])


def _pooled_product(node: Node, graph: Graph) -> ReducedProduct | None:
    """nn.AvgPool1d / F.avg_pool1d over a linear map's features (its product, or the product unsqueezed to one
    channel) in windows of k with stride k and no padding: each output is the mean of k consecutive features."""
    window = pool_window(node, 1)
    value = node.args[0] if node.args else None
    if (not is_float(node) or not isinstance(value, Ref) or window is None or window[1] != window[0]
            or window[2] != (0,) or arg(node, "ceil_mode", 4)):
        return None
    k = window[0][0]
    current, between = graph.by_name[value.name], []
    if current.op == "unsqueeze" and isinstance(current.args[0], Ref) and current.shape and len(current.shape) == 3 \
            and arg(current, "dim", 1) % 3 == 1:
        between.append(current)
        current = graph.by_name[current.args[0].name]
    if not _linear_map(current, graph) or not _only_uses(graph, [current, *between]) or current.shape[-1] < k:
        return None
    return ReducedProduct(node, current, [], k)


def _only_uses(graph: Graph, nodes: list[Node]) -> bool:
    return all(len(graph.users(n.name)) == 1 and not graph.is_output(n.name) for n in nodes)


def _rows(t: str, dim: int, rank: int, m: int, g: int, n: int, how: str) -> str:
    """Text reducing the n features of tensor `t` (of rank 1 or 2, features along `dim`) to m, each of g
    consecutive ones (m = 1, g = n: all of them, the dim kept)."""
    if m == 1 and g == n:
        return f"{t}.{how}({dim}, keepdim=True)"
    cut = "" if m * g == n else (f"[:{m * g}]" if dim == 0 else f"[:, :{m * g}]")
    shape = {(1, 0): f"{m}, {g}", (2, 0): f"{m}, {g}, -1", (2, 1): f"-1, {m}, {g}"}[(rank, dim)]
    return f"{t}{cut}.reshape({shape}).{how}({dim + 1})"


def _affine_step(node: Node, graph: Graph) -> tuple[Ref, Any] | None:
    """(value, c) of `value * c`, `value / c` with c a number or a one-element tensor, or `value + c`, `value - c`
    with c a number or a tensor constant along every dim but the last (one value, or one a feature) of the
    node's dtype; the value of the node's own shape, first (or either side of a product or a sum). None for any
    other node."""
    if node.op not in ("mul", "div", "add", "sub") or len(node.args) != 2 or set(node.attrs) - {"arg_shapes"}:
        return None
    value, c = node.args
    if node.op in ("mul", "add") and not isinstance(value, Ref):
        value, c = c, value
    if not isinstance(value, Ref) or graph.shape_of(value) != node.shape or not node.shape:
        return None
    if isinstance(c, (int, float)) and not isinstance(c, bool):
        return value, c
    c_shape = graph.shape_of(c) if isinstance(c, (Ref, Attr)) else None
    if c_shape is None or graph.dtype_of(c) != node.dtype or len(c_shape) > len(node.shape):
        return None
    one = math.prod(c_shape) == 1
    per_feature = bool(c_shape) and math.prod(c_shape[:-1]) == 1 and c_shape[-1] == node.shape[-1]
    return (value, c) if one or (per_feature and node.op in ("add", "sub")) else None


def _linear_map(node: Node, graph: Graph) -> bool:
    if not is_float(node) or not node.shape:
        return False
    if node.op == "linear":
        return node.module is not None and bool(node.attrs.get("has_weight")) and len(node.args) == 1
    return (node.op == "matmul" and len(node.args) == 2 and all(isinstance(a, (Ref, Attr)) for a in node.args)
            and len(graph.shape_of(node.args[1]) or ()) == 2 and len(graph.shape_of(node.args[0]) or ()) >= 1)


def reduce_product_text(reduced: ReducedProduct, graph: Graph) -> tuple[str, list[Ref | Attr]]:
    """PyTorch text computing the reduction from the linear map's input and weight, and the operands it reads.
    Each output reduces `window` consecutive features j: sum_j (x W^T + b)_j = x (sum_j W_j)^T + sum_j b_j, so
    the product is taken with the weight's rows reduced window by window (one row for a sum over all features:
    a matrix-vector product); a factor stays a factor; an offset c adds c's reduction (sum: N c for one value,
    mean: c itself)."""
    node, product, g = reduced.reduction, reduced.product, reduced.window
    how = "sum" if node.op == "sum" else "mean"
    n = product.shape[-1]
    m = n // g
    if product.op == "linear":
        x, weight = product.args[0], Attr(f"{product.module}.weight")
        text, operands = f"torch.nn.functional.linear({_text(x)}, {_rows(weight.code, 0, 2, m, g, n, how)}", [x, weight]
        if product.attrs.get("has_bias"):
            operands.append(Attr(f"{product.module}.bias"))
            text += f", {_rows(operands[-1].code, 0, 1, m, g, n, how)}"
        text += ")"
    else:
        x, other = product.args
        text, operands = f"torch.matmul({_text(x)}, {_rows(_text(other), 1, 2, m, g, n, how)})", [x, other]
    for step in reduced.chain:
        _, c = _affine_step(step, graph)
        sign = {"mul": "*", "div": "/", "add": "+", "sub": "-"}[step.op]
        if isinstance(c, (int, float)):
            term = repr(c * n) if step.op in ("add", "sub") and how == "sum" else repr(c)
        elif math.prod(graph.shape_of(c)) == 1:
            term = f"{_text(c)}.reshape(())" + (f" * {n}" if how == "sum" and step.op in ("add", "sub") else "")
            operands.append(c)
        else:
            term = f"{_text(c)}.{how}()"
            operands.append(c)
        text = f"({text}) {sign} ({term})"
    if node.op == "avg_pool1d":  # (..., m) as the pooling's (N, 1, m) where the product was unsqueezed
        return (f"({text}).unsqueeze(1)" if len(node.shape) > len(product.shape) else text), operands
    if not arg(node, "keepdim", 2):
        text = f"({text}).squeeze(-1)"
    return text, operands


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
    found = find_simplifications(graph)
    # the reductions' texts first: a neutral factor inside a reduced chain is rewritten below
    reduced = {name: reduce_product_text(r, graph) for name, _ in found
               if (r := reduced_product(graph.by_name[name], graph)) is not None}
    for name, description in found:
        node = graph.by_name[name]
        if name in reduced:
            text, operands = reduced[name]
            node.op, node.args, node.attrs, node.code = "reduced_product", tuple(operands), {}, text
        elif node.op == "matmul":
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
               "tril/triu of a product computed on its kept side only, a sum or mean over a linear map's "
               "features as a product with the weight's reduced rows")
    templates = {"triangular_gemm": lower_triangular}

    def sites(self, graph: Graph) -> list[str]:
        triangular = [n.name for n in graph.nodes if triangular_region(n, graph) is not None]
        return [s for s, _ in find_simplifications(graph)] + triangular

    def absent_reason(self) -> str:
        return ("no diagonal product, double transpose, identity op, redundant copy, triangular product or "
                "reduction over a linear map's features")

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
