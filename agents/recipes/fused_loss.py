"""fused_loss: losses computed and reduced in one sweep over the inputs.

Elementwise losses (mse, l1, smooth-l1, huber, kl-div, hinge-embedding, and any loss written out as
a mean or sum of pointwise work over two or more of the forward's inputs, such as
torch.mean(torch.clamp(1 - p * t, min=0))) compute their term from the inputs (the prediction
read through its producer's pointwise chain, e.g. the log of kl_div(log(p), t)) and reduce it with
SPLIT programs writing partial sums, then one program adds the partials in a fixed order
(deterministic, no atomics) and scales them (mean, batchmean or sum).
Row losses: one program per row accumulates the row's sums in one sweep over its columns and turns
them into the row's loss (cross-entropy: logsumexp(x) - x[target], rows whose target is
ignore_index counting for nothing; triplet margin: max(d(a, p) - d(a, n) + margin, 0) with
d(u, v) = ||u - v + eps||_p; cosine embedding; and a mean or sum of pointwise work over
cosine_similarity or pairwise_distance rows), then the same deterministic mean over the rows.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import FLOATS, first_operand, normalise_dims
from kskill.agents.recipes.regions import Region, body_feeding, group_pointwise, is_pointwise
from kskill.agents.recipes.templates.common import (
    TARGET_SMS as SMS, indent, next_pow2, operand_key, program_id, split_chunk, wide_index)
from kskill.agents.recipes.templates.fused_io import FusedIO
from kskill.agents.recipes.templates.loss import SUM_KERNEL, RowLoss, partials_launcher
from kskill.agents.recipes.templates.loss import row_loss_unit as row_loss_kernels
from kskill.agents.recipes.templates.unit import KernelUnit, arg_name, prepare

ELEMENTWISE = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "hinge_embedding_loss")
LOSSES = (*ELEMENTWISE, "cross_entropy")
ROW_LOSSES = ("triplet_margin_loss", "cosine_embedding_loss")
SIMILARITIES = ("cosine_similarity", "pairwise_distance")  # row values a written-out loss may reduce
WRITTEN = ("mean", "sum")  # the reductions that end a loss written out


def loss_region(node: Node, graph: Graph) -> Region | None:
    if node.op in LOSSES:
        return _library_loss(node, graph)
    if node.op in ROW_LOSSES:
        return row_loss_region(node, graph)
    if node.op in WRITTEN:
        return _written_loss(node, graph)
    return None


def _library_loss(node: Node, graph: Graph) -> Region | None:
    at = node.attrs
    if node.module is not None:
        pred, target = node.args[0], node.args[1]
    else:
        pred, target = at.get("input", node.args[0] if node.args else None), at.get("target")
        if target is None and len(node.args) > 1:
            target = node.args[1]
    if not isinstance(pred, (Ref, Attr)) or not isinstance(target, (Ref, Attr)):
        return None
    if str(graph.dtype_of(pred)) not in FLOATS:
        return None
    reduction = at.get("reduction", "mean")
    if at.get("size_average") is not None or at.get("reduce") is not None:
        return None
    if node.op == "cross_entropy":
        pshape, tshape = graph.shape_of(pred), graph.shape_of(target)
        if (len(pshape) != 2 or tuple(tshape) != (pshape[0],) or str(graph.dtype_of(target)) != "torch.int64"
                or at.get("weight") is not None or at.get("label_smoothing", 0.0) or reduction == "none"):
            return None
    elif graph.shape_of(pred) != graph.shape_of(target) or reduction == "none":
        return None
    if node.op == "kl_div" and at.get("log_target"):
        return None
    # elementwise losses read `pred` through its producer's pointwise chain (kl_div(log(p), t) in
    # one pass); the scalar result takes no epilogue (a later scalar op runs on its own)
    prologue = {"prologue_operand": pred} if node.op != "cross_entropy" and isinstance(pred, Ref) else {}
    return Region("loss", "fused_loss", node,
                  extra={**prologue, "epilogue_ok": False, "pred": pred, "target": target, "reduction": reduction,
                         "beta": float(at.get("beta", 1.0)), "delta": float(at.get("delta", 1.0)),
                         "margin": float(at.get("margin", 1.0)), "ignore_index": at.get("ignore_index", -100)})


def _written_loss(node: Node, graph: Graph) -> Region | None:
    """torch.mean / torch.sum to one value of a pointwise chain over two or more of the forward's inputs
    (the chain becomes the loss term, computed as it loads), or over cosine_similarity or
    pairwise_distance rows (a row loss)."""
    x = first_operand(node)
    if node.shape != () or node.attrs.get("dtype") is not None or not isinstance(x, Ref):
        return None
    shape = tuple(graph.shape_of(x) or ())
    dim = node.attrs.get("dim")
    if not shape or (dim is not None and normalise_dims(dim, len(shape)) != tuple(range(len(shape)))):
        return None
    allowed = {n.name for n in graph.nodes if is_pointwise(n, graph)}
    body = body_feeding(group_pointwise(graph, allowed), node, x, graph)
    if body is None or body.domain != shape:
        return None
    scale = 1.0 / math.prod(shape) if node.op == "mean" else 1.0
    sources = [graph.by_name[o.name] for o in body.external(graph) if isinstance(o, Ref)]
    similar = [n for n in sources if n.op in SIMILARITIES]
    if similar:
        return similarity_loss_region(node, graph, similar, body, scale) if len(similar) == 1 else None
    if sum(n.op == "input" for n in sources) < 2:
        return None  # a mean of work over one input is a reduction, not a loss
    return Region("loss", "fused_loss", node, prologue=body,
                  extra={"epilogue_ok": False, "pred": x, "target": None, "reduction": node.op, "scale": scale})


def row_loss_region(node: Node, graph: Graph) -> Region | None:
    """nn.TripletMarginLoss / F.triplet_margin_loss (p = 1 or 2) and cosine_embedding_loss over (rows, D)
    inputs, reduced by mean or sum."""
    at = node.attrs
    reduction = at.get("reduction", "mean")
    if reduction not in WRITTEN or at.get("size_average") is not None or at.get("reduce") is not None:
        return None
    names = ("anchor", "positive", "negative") if node.op == "triplet_margin_loss" else ("input1", "input2", "target")
    operands = list(node.args[:3]) if node.module is not None else [at.get(n) for n in names]
    rows_of, target = (operands, None) if node.op == "triplet_margin_loss" else (operands[:2], operands[2])
    if not _row_operands(graph, rows_of) or (target is not None and not _row_shaped(graph, target, rows_of[0])):
        return None
    p = at.get("p", 2)
    if node.op == "triplet_margin_loss" and p not in (1, 2):
        return None
    rows = graph.shape_of(rows_of[0])[0]
    return Region("row_loss", "fused_loss", node, extra={
        "epilogue_ok": False, "rows_of": rows_of, "target": target, "p": p, "eps": float(at.get("eps", 1e-6)),
        "margin": float(at.get("margin", 1.0 if node.op == "triplet_margin_loss" else 0.0)),
        "swap": bool(at.get("swap", False)), "scale": 1.0 / rows if reduction == "mean" else 1.0})


def similarity_loss_region(node: Node, graph: Graph, similar: list[Node], body: Any, scale: float) -> Region | None:
    """A mean or sum of pointwise work over the rows of one cosine_similarity or pairwise_distance of two
    (rows, D) tensors along D (torch.mean(1 - F.cosine_similarity(p, t, dim=1)))."""
    sim = similar[0]
    at = sim.attrs
    rows_of = list(sim.args[:2]) if sim.module is not None else [at.get("x1"), at.get("x2")]
    if not _row_operands(graph, rows_of) or body.domain != (graph.shape_of(rows_of[0])[0],):
        return None
    if sim.op == "cosine_similarity" and at.get("dim", 1) not in (1, -1):
        return None
    p = at.get("norm", at.get("p", 2.0))
    if sim.op == "pairwise_distance" and (p not in (1, 2) or at.get("keepdim")):
        return None
    eps = float(at.get("eps", 1e-8 if sim.op == "cosine_similarity" else 1e-6))
    return Region("row_loss", "fused_loss", node, extra={
        "epilogue_ok": False, "rows_of": rows_of, "similarity": sim.op, "value_of": sim.name, "row_body": body,
        "p": p, "eps": eps, "scale": scale, "covers": [sim.name, *body.names()]})


def _row_operands(graph: Graph, operands: list[Any]) -> bool:
    """Two or three float (rows, D) tensors of one shape."""
    shapes = {tuple(graph.shape_of(o) or ()) if isinstance(o, (Ref, Attr)) else None for o in operands}
    shape = next(iter(shapes))
    return len(shapes) == 1 and shape is not None and len(shape) == 2 and all(
        str(graph.dtype_of(o)) in FLOATS for o in operands)


def _row_shaped(graph: Graph, operand: Any, like: Any) -> bool:
    return isinstance(operand, (Ref, Attr)) and tuple(graph.shape_of(operand) or ()) == (graph.shape_of(like)[0],)


def _distance_sums(p: float, eps: float, pairs: list[tuple[str, str]]) -> list[str]:
    """sum |u - v + eps|^p per pair, as pairwise_distance computes it (eps added to the difference)."""
    power = "tl.abs({d})" if p == 1 else "{d} * {d}"
    return [power.format(d=f"({u} - {v} + {eps!r})") for u, v in pairs]


def row_loss_spec(region: Region) -> RowLoss:
    """The sums and row value of each row loss fused_loss lowers."""
    x, op = region.extra, region.anchor.op
    root = "tl.sqrt({})" if x["p"] == 2 else "{}"
    if op == "triplet_margin_loss":
        pairs = [("x0", "x1"), ("x0", "x2")] + ([("x1", "x2")] if x["swap"] else [])
        near = "tl.minimum(d1, " + root.format("s2") + ")" if x["swap"] else "d1"
        return RowLoss(x["rows_of"], _distance_sums(x["p"], x["eps"], pairs), [
            f"d0 = {root.format('s0')}", f"d1 = {root.format('s1')}",
            f"r = tl.maximum(d0 - {near} + {x['margin']!r}, 0.0)"], scale=x["scale"])
    if op == "cosine_embedding_loss":  # ATen: cos = x1.x2 / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12))
        return RowLoss(x["rows_of"], ["x0 * x1", "x0 * x0", "x1 * x1"], [
            "cos = s0 / tl.sqrt((s1 + 1e-12) * (s2 + 1e-12))",
            f"r = tl.where(y0 == 1.0, 1.0 - cos, 0.0) + tl.where(y0 == -1.0, tl.maximum(cos - {x['margin']!r}, 0.0), 0.0)"],
            row_operands=[x["target"]], scale=x["scale"])
    if x["similarity"] == "cosine_similarity":  # x1.x2 / (max(|x1|, eps) * max(|x2|, eps))
        return RowLoss(x["rows_of"], ["x0 * x1", "x0 * x0", "x1 * x1"], [
            f"r = s0 / (tl.maximum(tl.sqrt(s1), {x['eps']!r}) * tl.maximum(tl.sqrt(s2), {x['eps']!r}))"],
            body=x["row_body"], value_of=x["value_of"], scale=x["scale"])
    return RowLoss(x["rows_of"], _distance_sums(x["p"], x["eps"], [("x0", "x1")]), [f"r = {root.format('s0')}"],
                   body=x["row_body"], value_of=x["value_of"], scale=x["scale"])


def row_loss_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    return row_loss_kernels(name, region, graph, row_loss_spec(region), params)


def _term(op: str, extra: dict[str, Any]) -> str:
    """The loss term of one element from prediction p and target t (a written-out loss: its chain's value p)."""
    beta, delta, margin = extra.get("beta", 1.0), extra.get("delta", 1.0), extra.get("margin", 1.0)
    d = "(p - t)"
    if op in WRITTEN:
        return "p"
    if op == "mse_loss":
        return f"{d} * {d}"
    if op == "l1_loss":
        return f"tl.abs({d})"
    if op == "smooth_l1_loss":
        if beta == 0.0:
            return f"tl.abs({d})"
        return f"tl.where(tl.abs({d}) < {beta!r}, 0.5 * {d} * {d} / {beta!r}, tl.abs({d}) - {0.5 * beta!r})"
    if op == "huber_loss":
        return f"tl.where(tl.abs({d}) < {delta!r}, 0.5 * {d} * {d}, {delta!r} * (tl.abs({d}) - {0.5 * delta!r}))"
    if op == "kl_div":
        return "tl.where(t > 0.0, t * (tl.log(tl.where(t > 0.0, t, 1.0)) - p), 0.0)"
    if op == "hinge_embedding_loss":  # as ATen: both parts count for a target that is neither 1 nor -1
        return f"tl.where(t != 1.0, tl.maximum({margin!r} - p, 0.0), 0.0) + tl.where(t != -1.0, p, 0.0)"
    raise ValueError(op)


def default_params(total: int) -> dict[str, Any]:
    """BLOCK elements per step (16 per thread: four 16-byte loads per input), SPLIT programs."""
    block = 4096 if total >= 1 << 22 else min(2048, next_pow2(max(total, 128)))
    return {"BLOCK": block, "SPLIT": max(1, min(4 * SMS, -(-total // (block * 4)))),
            "num_warps": 8 if block >= 2048 else 4}


def loss_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    op = region.anchor.op
    if op == "cross_entropy":
        return _cross_entropy(name, region, graph, params)
    if region.kind == "row_loss":
        return row_loss_unit(name, region, graph, params)
    pred, target, reduction = region.extra["pred"], region.extra["target"], region.extra["reduction"]
    shape = tuple(graph.shape_of(pred))
    total = math.prod(shape)
    scale = region.extra.get("scale") or {"mean": 1.0 / total, "sum": 1.0, "batchmean": 1.0 / shape[0]}[reduction]
    p = {**default_params(total), **{k: v for k, v in params.items() if k in ("BLOCK", "SPLIT", "num_warps")}}
    block, split, warps = p["BLOCK"], p["SPLIT"], p["num_warps"]
    chunk = split_chunk(total, split, block)
    io = FusedIO(region, graph)
    if region.prologue is None and region.extra.get("prologue_operand") is None:
        io.add(pred)
    target_load = [] if target is None else [f"    t = tl.load({io.add(target)} + offs, mask=mask, other=0.0).to(tl.float32)"]
    load, value = io.load_input("offs", "mask")
    body = [f"s = {program_id(0, io.wide)}", "acc = tl.zeros([BLOCK], tl.float32)",
            "for start in range(s * CHUNK, s * CHUNK + CHUNK, BLOCK):",
            "    offs = start + tl.arange(0, BLOCK)", "    mask = offs < NUMEL"]
    body += ["    " + ln for ln in load] + [
        f"    p = {value}", *target_load,
        f"    acc += tl.where(mask, {_term(op, region.extra)}, 0.0)",
        "tl.store(partial_ptr + s, tl.sum(acc, axis=0))"]
    ptrs = ", ".join(io.ptrs[operand_key(o)] for o in io.operands)
    kernel = (f"@triton.jit\ndef {name}_partial({ptrs}, partial_ptr, NUMEL: tl.constexpr, "
              f"CHUNK: tl.constexpr, BLOCK: tl.constexpr):\n"
              f"    \"\"\"{op}: partial sum of the loss terms of one chunk (inputs read once, terms never stored).\"\"\"\n"
              f"{indent(body, 4)}\n\n" + SUM_KERNEL.format(name=name))
    launcher = partials_launcher(name, io, graph, "partial", split, f"NUMEL={total}, CHUNK={chunk}, BLOCK={block}, "
                                 f"num_warps={warps}", scale, region.anchor.dtype or graph.dtype_of(pred))
    return KernelUnit(name, kernel, launcher, list(io.operands), [region.anchor.name],
                      {"BLOCK": block, "SPLIT": split, "num_warps": warps}, region.technique)




def _cross_entropy(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    logits, target = region.extra["pred"], region.extra["target"]
    rows, classes = graph.shape_of(logits)
    block = params.get("BLOCK_R", min(next_pow2(classes), 8192))
    warps = params.get("num_warps", 4 if block <= 2048 else 8)
    ignore = int(region.extra["ignore_index"])
    reduction = region.extra["reduction"]
    body = [f"row = {program_id(0, wide_index((rows, classes)))}", "cols = tl.arange(0, BLOCK_R)",
            "m = tl.full([BLOCK_R], float('-inf'), tl.float32)", "l = tl.zeros([BLOCK_R], tl.float32)",
            "for start in range(0, C, BLOCK_R):",
            "    offs = start + cols", "    mask = offs < C",
            "    x = tl.load(logits_ptr + row * C + offs, mask=mask, other=float('-inf')).to(tl.float32)",
            "    m_new = tl.maximum(m, x)",
            "    l = l * tl.exp(tl.where(m_new == float('-inf'), 0.0, m - m_new)) + tl.where(mask, tl.exp(x - m_new), 0.0)",
            "    m = m_new",
            "big = tl.max(m, axis=0)", "lse = big + tl.log(tl.sum(l * tl.exp(m - big), axis=0))",
            "target = tl.load(target_ptr + row)", f"valid = target != {ignore}",
            "picked = tl.load(logits_ptr + row * C + tl.where(valid, target, 0)).to(tl.float32)",
            "tl.store(loss_ptr + row, tl.where(valid, lse - picked, 0.0))",
            "tl.store(count_ptr + row, tl.where(valid, 1.0, 0.0))"]
    kernel = (f"@triton.jit\ndef {name}_rows(logits_ptr, target_ptr, loss_ptr, count_ptr, C: tl.constexpr, "
              "BLOCK_R: tl.constexpr):\n    \"\"\"Cross-entropy of one row: online logsumexp minus the target logit.\"\"\"\n"
              f"{indent(body, 4)}\n\n" + SUM_KERNEL.format(name=name))
    x, t = arg_name(logits), arg_name(target)
    src = [f"def {name}({x}, {t}):", f"    {x} = {prepare(logits, graph)}", f"    {t} = {prepare(target, graph)}",
           f"    loss = torch.empty(({rows},), device={x}.device, dtype=torch.float32)",
           f"    count = torch.empty(({rows},), device={x}.device, dtype=torch.float32)",
           f"    {name}_rows[({rows},)]({x}, {t}, loss, count, C={classes}, BLOCK_R={block}, num_warps={warps})",
           f"    out = torch.empty((), device={x}.device, dtype={graph.dtype_of(logits)})",
           f"    {name}_sum[(1,)](loss, count, out, N={rows}, SCALE=1.0, COUNTED={reduction == 'mean'}, "
           f"BLOCK={min(next_pow2(rows), 4096)}, num_warps=4)",
           "    return out"]
    return KernelUnit(name, kernel, "\n".join(src) + "\n", [logits, target], [region.anchor.name],
                      {"BLOCK_R": block, "num_warps": warps}, region.technique)


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    return loss_unit(name, region, how.graph, how.params)


class FusedLoss(AnchorRecipe):
    id = "fused_loss"
    summary = ("losses (mse, l1, smooth-l1, huber, kl-div, hinge, cross-entropy, triplet margin, cosine, and losses "
               "written out as a mean of pointwise work) and their reduction in one sweep")
    templates = {"loss": lower, "row_loss": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return loss_region(node, graph)

    def absent_reason(self) -> str:
        return "no supported loss function call, nor a mean or sum of pointwise work over two or more inputs"


RECIPE = FusedLoss()
