"""fused_loss: losses computed and reduced in one sweep over the inputs.

Elementwise losses (mse, l1, smooth-l1, huber, kl-div) compute their term from both inputs (the
prediction read through its producer's pointwise chain, e.g. the log of kl_div(log(p), t)) and
reduce it with SPLIT programs writing partial sums, then one program adds the partials in a
fixed order (deterministic, no atomics) and scales them (mean, batchmean or sum).
Cross-entropy: one program per row computes logsumexp(x) - x[target] (rows whose target is
ignore_index count for nothing), then the same deterministic mean over the valid rows.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import FLOATS
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import (
    TARGET_SMS as SMS, indent, next_pow2, operand_key, program_id, split_chunk, wide_index)
from kskill.agents.recipes.templates.fused_io import FusedIO
from kskill.agents.recipes.templates.unit import KernelUnit, arg_name, prepare

LOSSES = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "cross_entropy")


def loss_region(node: Node, graph: Graph) -> Region | None:
    if node.op not in LOSSES:
        return None
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
                         "ignore_index": at.get("ignore_index", -100)})


def _term(op: str, beta: float, delta: float) -> str:
    d = "(p - t)"
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
    pred, target, reduction = region.extra["pred"], region.extra["target"], region.extra["reduction"]
    shape = tuple(graph.shape_of(pred))
    total = math.prod(shape)
    scale = {"mean": 1.0 / total, "sum": 1.0, "batchmean": 1.0 / shape[0]}[reduction]
    p = {**default_params(total), **{k: v for k, v in params.items() if k in ("BLOCK", "SPLIT", "num_warps")}}
    block, split, warps = p["BLOCK"], p["SPLIT"], p["num_warps"]
    chunk = split_chunk(total, split, block)
    io = FusedIO(region, graph)
    if region.prologue is None and region.extra.get("prologue_operand") is None:
        io.add(pred)
    target_ptr = io.add(target)
    load, value = io.load_input("offs", "mask")
    body = [f"s = {program_id(0, io.wide)}", "acc = tl.zeros([BLOCK], tl.float32)",
            "for start in range(s * CHUNK, s * CHUNK + CHUNK, BLOCK):",
            "    offs = start + tl.arange(0, BLOCK)", "    mask = offs < NUMEL"]
    body += ["    " + ln for ln in load] + [
        f"    p = {value}",
        f"    t = tl.load({target_ptr} + offs, mask=mask, other=0.0).to(tl.float32)",
        f"    acc += tl.where(mask, {_term(op, region.extra['beta'], region.extra['delta'])}, 0.0)",
        "tl.store(partial_ptr + s, tl.sum(acc, axis=0))"]
    ptrs = ", ".join(io.ptrs[operand_key(o)] for o in io.operands)
    kernel = (f"@triton.jit\ndef {name}_partial({ptrs}, partial_ptr, NUMEL: tl.constexpr, "
              f"CHUNK: tl.constexpr, BLOCK: tl.constexpr):\n"
              f"    \"\"\"{op}: partial sum of the loss terms of one chunk (inputs read once, terms never stored).\"\"\"\n"
              f"{indent(body, 4)}\n\n" + _SUM_KERNEL.format(name=name))
    names = [arg_name(o) for o in io.operands]
    src = [f"def {name}({', '.join(names)}):"]
    src += [f"    {arg_name(o)} = {prepare(o, graph)}" for o in io.operands]
    src += [f"    partial = torch.empty(({split},), device={names[0]}.device, dtype=torch.float32)",
            f"    {name}_partial[({split},)]({', '.join(names)}, partial, NUMEL={total}, CHUNK={chunk}, "
            f"BLOCK={block}, num_warps={warps})",
            f"    out = torch.empty((), device={names[0]}.device, dtype={region.anchor.dtype or graph.dtype_of(pred)})",
            f"    {name}_sum[(1,)](partial, partial, out, N={split}, SCALE={scale!r}, COUNTED=False, "
            f"BLOCK={min(next_pow2(split), 4096)}, num_warps=4)",
            "    return out"]
    return KernelUnit(name, kernel, "\n".join(src) + "\n", list(io.operands), [region.anchor.name],
                      {"BLOCK": block, "SPLIT": split, "num_warps": warps}, region.technique)


_SUM_KERNEL = '''@triton.jit
def {name}_sum(values_ptr, counts_ptr, out_ptr, N: tl.constexpr, SCALE: tl.constexpr, COUNTED: tl.constexpr,
               BLOCK: tl.constexpr):
    """Adds the partials in a fixed order: SCALE * sum, or sum / sum(counts) when COUNTED."""
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        total += tl.load(values_ptr + offs, mask=offs < N, other=0.0)
        if COUNTED:
            count += tl.load(counts_ptr + offs, mask=offs < N, other=0.0)
    if COUNTED:
        tl.store(out_ptr, tl.sum(total, axis=0) / tl.sum(count, axis=0))
    else:
        tl.store(out_ptr, tl.sum(total, axis=0) * SCALE)
'''


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
              f"{indent(body, 4)}\n\n" + _SUM_KERNEL.format(name=name))
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
    summary = "losses (mse, l1, smooth-l1, huber, kl-div, cross-entropy) and their reduction in one kernel"
    templates = {"loss": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return loss_region(node, graph)

    def absent_reason(self) -> str:
        return "no supported loss function call"


RECIPE = FusedLoss()
