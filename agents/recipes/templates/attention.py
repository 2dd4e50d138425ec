"""Template: flash-style attention, softmax(q k^T * scale) v without the S x S matrix.

One program per (batch*head, block of BLOCK_M queries) streams keys and values in BLOCK_N
tiles, keeping a running max and normaliser per query row (online softmax) and rescaling the
accumulator, so memory traffic is O(S * D) instead of O(S^2). Dots hold fp32 tolerances either
exact on CUDA cores (`dot_precision="ieee"`, the default) or as "tf32x3" on tensor cores (each
operand split into a TF32 high part and remainder, three products summed; see templates/gemm.py),
with larger tiles; "tf32" (one TF32 product) only where the tolerance admits ~1e-3 relative
error. Causal masking is supported.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.graph import Graph
from kskill.agents.recipes.templates.gemm import DOT_PRECISIONS
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import program_id, wide_index
from kskill.agents.recipes.templates.unit import KernelUnit, arg_name

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


__all__ = ["attention_unit"]
