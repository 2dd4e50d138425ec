"""online_softmax: softmax and log-softmax with an online normaliser.

Rows (the softmax dim innermost): a row that fits in registers is read once and written once;
a longer row of up to 256 chunks is split over programs that exchange their chunks' max and
normaliser (templates/exchange.py) and is read once too; otherwise, or as the two_reads variant
chooses, it is read twice: one pass keeps a running max m and normaliser l per lane
(l <- l * exp(m - m') + exp(x - m')), merged across lanes at the end, and a second pass writes
exp(x - M) / L (or x - M - log L). Strided softmax (dim not innermost) keeps the whole dim of a
block of columns in registers. The prologue (e.g. a scale) and epilogue are fused.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.graph import Graph, Node
from kskill.agents.recipes.matching import first_operand, is_float, normalise_dims, prq
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import indent, next_pow2, program_id
from kskill.agents.recipes.templates.exchange import (
    Grouped, Split, chosen_split, exchange_unit, gather, publish)
from kskill.agents.recipes.templates.fused_io import FusedIO, adopted_channels_last
from kskill.agents.recipes.templates.unit import KernelUnit

MAX_PERSISTENT = 8192
MAX_PERSISTENT_COLUMN = 4096  # softmax over a strided dim keeps the whole dim in registers
# Long rows split over programs: two rows a program in chunks of 4096 over 4 warps. On the H200 a softmax over
# 4096 x 393216 ran in 3.91 ms, against 4.03-4.45 with one row a program and 3.95-4.29 with other chunks
# (eval/runs/push-h200-s38/NOTES.md); with the flag in place of the fallback, 3.54-3.57 ms, the same as one
# row a program, and 3.74-5.51 with other groups (push-h200-s39/NOTES.md).
GROUPED = Grouped(2, 4096, 4)


def default_params(view: tuple[int, int, int]) -> dict[str, Any]:
    p, r, q = view
    if q == 1:
        block = min(next_pow2(r), MAX_PERSISTENT)
        return {"BLOCK_R": block, "num_warps": 4 if block <= 1024 else (8 if block <= 4096 else 16)}
    block_r = next_pow2(r)
    return {"BLOCK_R": block_r, "BLOCK_Q": max(1, min(next_pow2(q), 4096 // block_r, 64)), "num_warps": 4}


def _out(log: bool, x: str, m: str, s: str) -> str:
    return f"({x} - {m}) - tl.log({s})" if log else f"tl.exp({x} - {m}) / {s}"


def channels_last_softmax(region: Region, graph: Graph) -> tuple[int, ...] | None:
    """The memory order to read an adopted convolution product in (fused_io.adopted_channels_last) for a
    softmax over its channels: each softmax then reads C contiguous values, and cuDNN does not transpose its
    output to NCHW first (on the H200 that transpose took 0.29 of level2/49's 0.97 ms,
    eval/runs/push-h200-s42/NOTES.md). None otherwise."""
    perm = adopted_channels_last(region, graph) if region.kind == "softmax" else None
    if perm is None:
        return None
    shape = tuple(region.extra["adopted"].shape)
    return perm if region.extra["view"] == (shape[0], shape[1], math.prod(shape[2:])) else None


def softmax_unit(name: str, region: Region, graph: Graph, params: dict[str, Any],
                 perm: tuple[int, ...] | None = None) -> KernelUnit:
    """`perm`: read the input in that memory order (channels_last_softmax), the strided form only."""
    p_, r_, q_ = region.extra["view"]
    log = region.extra["log"]
    p = {**default_params(region.extra["view"]), **{k: v for k, v in params.items() if k in ("BLOCK_R", "BLOCK_Q", "num_warps")}}
    io = FusedIO(region, graph, perm=perm if q_ > 1 else None, perm_out=False)
    pid = program_id(0, io.wide)
    if q_ == 1 and r_ <= p["BLOCK_R"]:
        load, x = io.load_input("offs", "mask", "float('-inf')")
        body = [f"row = {pid}", "cols = tl.arange(0, BLOCK_R)", "offs = row * R + cols", "mask = cols < R"] + load + [
            f"x = tl.where(mask, {x}, float('-inf'))", "m = tl.max(x, axis=0)",
            "s = tl.sum(tl.where(mask, tl.exp(x - m), 0.0), axis=0)", f"y = {_out(log, 'x', 'm', 's')}"]
        body += io.store_result("y", "offs", "mask")
        doc = "one row per program, held in registers: one read, one write"
        grid = f"({p_},)"
    elif q_ == 1 and (split := chosen_split(p_, r_, params, ("BLOCK_R",), GROUPED)) is not None:
        return _exchange_unit(name, region, io, split)
    elif q_ == 1:
        load1, x1 = io.load_input("offs", "mask", "float('-inf')")
        load2, x2 = io.load_input("offs", "mask", "float('-inf')")
        body = [f"row = {pid}", "m = tl.full([BLOCK_R], float('-inf'), tl.float32)",
                "l = tl.zeros([BLOCK_R], tl.float32)",
                "for start in range(0, R, BLOCK_R):",
                "    cols = start + tl.arange(0, BLOCK_R)", "    offs = row * R + cols", "    mask = cols < R"]
        body += ["    " + ln for ln in load1] + [
            f"    x = tl.where(mask, {x1}, float('-inf'))", "    m_new = tl.maximum(m, x)",
            "    l = l * tl.exp(tl.where(m_new == float('-inf'), 0.0, m - m_new)) + tl.where(mask, tl.exp(x - m_new), 0.0)",
            "    m = m_new",
            "big = tl.max(m, axis=0)", "s = tl.sum(l * tl.exp(m - big), axis=0)",
            "for start in range(0, R, BLOCK_R):",
            "    cols = start + tl.arange(0, BLOCK_R)", "    offs = row * R + cols", "    mask = cols < R"]
        body += ["    " + ln for ln in load2] + [f"    y = {_out(log, x2, 'big', 's')}"]
        body += ["    " + ln for ln in io.store_result("y", "offs", "mask")]
        doc = "online softmax: running max and normaliser in one read, then a second read that writes"
        grid = f"({p_},)"
    else:
        # a channels-last product holds the R values of a column contiguous; the result is stored in NCHW order
        load, x = io.load_input("offs_in" if io.perm else "offs", "mask", "float('-inf')")
        body = [f"pid_p = {pid}", f"pid_q = {program_id(1, io.wide)}", "rs = tl.arange(0, BLOCK_R)[:, None]",
                "qs = pid_q * BLOCK_Q + tl.arange(0, BLOCK_Q)[None, :]",
                "offs = pid_p * R * Q + rs * Q + qs", "mask = (rs < R) & (qs < Q)"]
        body += ["offs_in = pid_p * R * Q + qs * R + rs"] if io.perm else []
        body += load + [
            f"x = tl.where(mask, {x}, float('-inf'))", "m = tl.max(x, axis=0)[None, :]",
            "s = tl.sum(tl.where(mask, tl.exp(x - m), 0.0), axis=0)[None, :]", f"y = {_out(log, 'x', 'm', 's')}"]
        body += io.store_result("y", "offs", "mask")
        doc = "softmax over a strided dim: the whole dim of BLOCK_Q columns in registers" + \
            (", read channels-last" if io.perm else "")
        grid = f"({p_}, {-(-q_ // p['BLOCK_Q'])})"
    kind = "log_softmax" if log else "softmax"
    kernel = (f"@triton.jit\ndef {name}_kernel({io.kernel_args()}, R: tl.constexpr, Q: tl.constexpr, "
              f"BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):\n    \"\"\"{kind}: {doc}.\"\"\"\n{indent(body, 4)}\n")
    block_q = p.get("BLOCK_Q", 1)
    launcher = io.launcher(name, grid, f"R={r_}, Q={q_}",
                           launch_opts=f"BLOCK_R={p['BLOCK_R']}, BLOCK_Q={block_q}, num_warps={p['num_warps']}")
    return io.unit(name, kernel, launcher, {"BLOCK_R": p["BLOCK_R"], "BLOCK_Q": block_q, "num_warps": p["num_warps"]})


def _exchange_unit(name: str, region: Region, io: FusedIO, split: Split) -> KernelUnit:
    """A long row split over SPLIT adjacent programs, each holding its chunk in registers: chunk max and
    normaliser exchanged (templates/exchange.py), then each program writes its chunk. One read."""
    p_, r_, _ = region.extra["view"]
    neg = "float('-inf')"
    load, x = io.load_input("offs", "mask", neg)
    first = load + [f"x = tl.where(mask, {x}, {neg})"] + _chunk_max_sum("x", "mask", "m_t", "l_t")
    first += publish("m_t", "l_t")
    body = gather() + [f"m_k = tl.where(ok, a_k, {neg})", "big = tl.max(m_k, axis=0)",
                       f"safe = tl.where(big == {neg}, 0.0, big)",
                       "norm = tl.sum(tl.where(ok, b_k * tl.exp(m_k - safe), 0.0), axis=0)"]
    body += [f"safe = tl.where(big == {neg}, 0.0, big)", f"y = {_out(region.extra['log'], 'x', 'safe', 'norm')}"]
    body += io.store_result("y", "offs", "mask")
    kind = "log_softmax" if region.extra["log"] else "softmax"
    doc = f"{kind}: a row over SPLIT programs, chunk statistics exchanged; one read, one write."
    return exchange_unit(name, io, p_, r_, split, first, body, doc)


def _chunk_max_sum(x: str, mask: str, m: str, s: str) -> list[str]:
    """A chunk's max `m` and normaliser `s` = sum(exp(x - m)); a chunk of -inf has m = -inf and s = 0."""
    return [f"{m} = tl.max({x}, axis=0)",
            f"{s} = tl.sum(tl.where({mask}, tl.exp({x} - tl.where({m} == float('-inf'), 0.0, {m})), 0.0), axis=0)"]


def softmax_region(node: Node, graph: Graph) -> Region | None:
    if node.op not in ("softmax", "log_softmax") or not is_float(node) or node.attrs.get("dtype"):
        return None
    dim = node.attrs.get("dim", node.args[1] if len(node.args) > 1 else None)
    if dim is None or node.shape is None:
        return None
    view = prq(node.shape, normalise_dims(dim, len(node.shape)))
    if view is None or (view[2] > 1 and view[1] > MAX_PERSISTENT_COLUMN):
        return None
    return Region("softmax", "online_softmax", node,
                  extra={"view": view, "prologue_operand": first_operand(node),
                         "log": node.op == "log_softmax"})


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    perm = channels_last_softmax(region, how.graph) if how.nhwc else None
    return softmax_unit(name, region, how.graph, how.params, perm)


class OnlineSoftmax(AnchorRecipe):
    id = "online_softmax"
    summary = "softmax / log-softmax in one read: running max and normaliser, then one write"
    templates = {"softmax": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return softmax_region(node, graph)

    def absent_reason(self) -> str:
        return "no softmax or log_softmax over a float tensor"


RECIPE = OnlineSoftmax()
