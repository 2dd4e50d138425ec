"""flash_attention: flash-style attention, softmax(q k^T * scale) v without the S x S matrix.

One program per (batch*head, block of BLOCK_M queries) streams keys and values in BLOCK_N
tiles, keeping a running max and normaliser per query row (online softmax) and rescaling the
accumulator, so memory traffic is O(S * D) instead of O(S^2). Dots hold fp32 tolerances either
exact on CUDA cores (`dot_precision="ieee"`, the default) or as "tf32x3" on tensor cores (each
operand split into a TF32 high part and remainder, three products summed; see gemm_epilogue_fusion),
with larger tiles; "tf32" (one TF32 product) only where the tolerance admits ~1e-3 relative
error. Causal masking is supported.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.gemm_epilogue_fusion import DOT_PRECISIONS
from kskill.agents.recipes.graph import Graph, Node, Ref
from kskill.agents.recipes.matching import first_operand, is_float
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import program_id, wide_index
from kskill.agents.recipes.templates.unit import KernelUnit, arg_name

def attention_region(node: Node, graph: Graph) -> Region | None:
    """SDPA calls, or matmul(softmax(matmul(q, k^T) * scale), v) with no mask."""
    if node.op == "scaled_dot_product_attention":
        at = node.attrs
        if at.get("attn_mask") is not None or at.get("dropout_p", 0.0) or at.get("enable_gqa"):
            return None
        q, k, v = at.get("query"), at.get("key"), at.get("value")
        return _attention(node, graph, q, k, v, at.get("scale"), bool(at.get("is_causal")), [], False)
    if node.op != "matmul" or len(node.args) < 2:
        return None
    probs, v = node.args[0], node.args[1]
    if not isinstance(probs, Ref) or graph.by_name[probs.name].op != "softmax":
        return None
    sm = graph.by_name[probs.name]
    scores = first_operand(sm)
    dim = sm.attrs.get("dim")
    if dim not in (-1, len(sm.shape) - 1) or not isinstance(scores, Ref):
        return None
    covers = [sm.name]
    scale = 1.0
    cur = graph.by_name[scores.name]
    if cur.op in ("mul", "div") and isinstance(cur.args[1], (int, float)) and isinstance(cur.args[0], Ref):
        scale = float(cur.args[1]) if cur.op == "mul" else 1.0 / float(cur.args[1])
        covers.append(cur.name)
        cur = graph.by_name[cur.args[0].name]
    if cur.op != "matmul" or not isinstance(cur.args[1], Ref):
        return None
    covers.append(cur.name)
    q = cur.args[0]
    kt = graph.by_name[cur.args[1].name]
    if kt.op != "transpose":
        return None
    dims = {d % len(kt.shape) for d in (kt.attrs.get("dim0", -2), kt.attrs.get("dim1", -1))}
    if dims != {len(kt.shape) - 2, len(kt.shape) - 1}:
        return None
    covers.append(kt.name)
    k = first_operand(kt)
    for name in covers:  # intermediates may not be used elsewhere
        if name != node.name and (graph.is_output(name) or len(graph.users(name)) != 1):
            return None
    return _attention(node, graph, q, k, v, scale, False, covers, True)


def _attention(node: Node, graph: Graph, q: Any, k: Any, v: Any, scale: Any, causal: bool,
               covers: list[str], pattern: bool) -> Region | None:
    shapes = [graph.shape_of(t) for t in (q, k, v)]
    if any(s is None or len(s) != 4 for s in shapes) or not is_float(node):
        return None
    (b, h, m, d), (_, _, n, dk), (_, _, _, dv) = shapes
    if d != dk or d not in (16, 32, 64, 128) or dv != d or shapes[0][:2] != shapes[1][:2]:
        return None
    return Region("attention", "flash_attention", node,
                  extra={"q": q, "k": k, "v": v, "scale": scale if scale is not None else d ** -0.5,
                         "causal": causal, "covers": covers, "pattern": pattern, "dims": (b, h, m, n, d)})


KERNEL = '''@triton.jit
def {name}_kernel(q_ptr, k_ptr, v_ptr, o_ptr, SCALE: tl.constexpr, M: tl.constexpr, N: tl.constexpr,
                  D: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  PRECISION: tl.constexpr):
    """Attention for BLOCK_M queries of one (batch, head): online softmax over BLOCK_N key tiles."""
    bh = {pid1}
    rows = {pid0} * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + bh * M * D + rows[:, None] * D + dims[None, :], mask=rows[:, None] < M, other=0.0)
    m_i = tl.full([BLOCK_M], float('-inf'), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kv_mask = cols[:, None] < N
        k = tl.load(k_ptr + bh * N * D + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * SCALE
        valid = cols[None, :] < N
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        s = tl.where(valid, s, float('-inf'))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(tl.where(m_new == float('-inf'), 0.0, m_i - m_new))
        p = tl.where(valid, tl.exp(s - m_new[:, None]), 0.0)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + bh * N * D + cols[:, None] * D + dims[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision=PRECISION)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + bh * M * D + rows[:, None] * D + dims[None, :], out, mask=rows[:, None] < M)
'''


def attention_unit(name: str, region: Region, graph: Graph, params: dict[str, Any]) -> KernelUnit:
    b, h, m, n, d = region.extra["dims"]
    q, k, v = region.extra["q"], region.extra["k"], region.extra["v"]
    precision = params.get("dot_precision", "ieee")
    if precision not in DOT_PRECISIONS:
        raise ValueError(f"dot_precision {precision!r}: use one of {DOT_PRECISIONS}")
    if precision == "ieee":
        block_m, block_n = params.get("BLOCK_M", 64 if d <= 64 else 32), params.get("BLOCK_N", 32)
    else:  # tensor-core tiles: 64 x 64 scores per step; fp32 operands double the registers of fp16's 128
        block_m, block_n = params.get("BLOCK_M", 64 if d <= 128 else 32), params.get("BLOCK_N", 64 if d <= 64 else 32)
    warps = params.get("num_warps", 4)
    stages = params.get("num_stages", 2)
    names = [arg_name(t) for t in (q, k, v)]
    if len(set(names)) < 3:
        names = [f"{x}_{i}" for i, x in enumerate(names)]
    src = [f"def {name}({', '.join(names)}):"]
    for nm, t in zip(names, (q, k, v)):
        src.append(f"    {nm} = {nm}.contiguous()")
    src += [f"    out = torch.empty(({b}, {h}, {m}, {d}), device={names[0]}.device, dtype={names[0]}.dtype)",
            f"    grid = (triton.cdiv({m}, {block_m}), {b * h})",
            f"    {name}_kernel[grid]({', '.join(names)}, out, SCALE={float(region.extra['scale'])!r}, M={m}, N={n}, "
            f"D={d}, CAUSAL={bool(region.extra['causal'])}, BLOCK_M={block_m}, BLOCK_N={block_n}, PRECISION={precision!r}, "
            f"num_warps={warps}, num_stages={stages})",
            "    return out"]
    wide = wide_index((b, h, m, d), (b, h, n, d))
    kernel = KERNEL.format(name=name, pid0=program_id(0, wide), pid1=program_id(1, wide))
    return KernelUnit(name, kernel, "\n".join(src) + "\n", [q, k, v], [region.anchor.name],
                      {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": warps, "num_stages": stages,
                       "dot_precision": precision},
                      region.technique)


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    return attention_unit(name, region, how.graph, how.params)


class FlashAttention(AnchorRecipe):
    id = "flash_attention"
    summary = "scaled dot-product attention as one tiled kernel with online softmax (no S x S matrix)"
    templates = {"attention": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return attention_region(node, graph)

    def absent_reason(self) -> str:
        return "no scaled_dot_product_attention call nor matmul-softmax-matmul pattern without mask/dropout"


RECIPE = FlashAttention()
