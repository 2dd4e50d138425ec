"""flash_attention: flash-style attention, softmax(q k^T * scale) v without the S x S matrix.

One program per (batch*head, block of BLOCK_M queries) streams keys and values in BLOCK_N
tiles, keeping a running max and normaliser per query row (online softmax) and rescaling the
accumulator, so memory traffic is O(S * D) instead of O(S^2). Dots hold fp32 tolerances either
exact on CUDA cores (`dot_precision="ieee"`, the default) or as "tf32x3" on tensor cores (each
operand split into a TF32 high part and remainder, three products summed; see gemm_epilogue_fusion),
with larger tiles; "tf32" (one TF32 product) only where the tolerance admits ~1e-3 relative
error. Causal masking is supported.

An nn.MultiheadAttention layer whose attention weights go unused is rewritten the same way: its
input and output projections stay library GEMMs (one packed GEMM when query, key and value are
one tensor, as the layer itself does), and the heads' attention runs in the kernel, so the
N x H x L x S weights that the layer materialises (and averages, to return them) are never built.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.gemm_epilogue_fusion import DOT_PRECISIONS
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.matching import first_operand, is_float
from kskill.agents.recipes.regions import Region
from kskill.agents.recipes.templates.common import program_id, wide_index
from kskill.agents.recipes.templates.unit import KernelUnit, arg_name

def attention_region(node: Node, graph: Graph) -> Region | None:
    """SDPA calls, nn.MultiheadAttention layers, or matmul(softmax(matmul(q, k^T) * scale), v) with no mask."""
    if node.op == "multihead_attention":
        return _multihead_region(node, graph)
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


# nn.MultiheadAttention.forward's parameters after query, key and value, and the values that keep
# the layer plain attention (None: no mask; a name missing here may take any value).
_MHA_PARAMETERS = ("key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal")
_MHA_PLAIN = {"key_padding_mask": None, "attn_mask": None, "is_causal": False}


def _multihead_region(node: Node, graph: Graph) -> Region | None:
    """A batched nn.MultiheadAttention with packed projections, no masks, extra key/value biases,
    zero attention or dropout, whose only use is its output (item 0; the weights go unused)."""
    at = node.attrs
    if (len(node.args) < 3 or not at.get("_qkv_same_embed_dim") or at.get("has_bias_kv") or at.get("add_zero_attn")
            or (at.get("dropout_p") and at.get("training"))):
        return None
    called = {**dict(zip(_MHA_PARAMETERS, node.args[3:])), **at.get("call_kwargs", {})}
    if any(name in _MHA_PLAIN and value != _MHA_PLAIN[name] for name, value in called.items()):
        return None

    def weights_unused(user: Node) -> bool:  # the output (item 0), or the weights (item 1) left unread
        return user.op == "getitem" and (user.args[1:] == (0,) or (
            user.args[1:] == (1,) and not graph.users(user.name) and not graph.is_output(user.name)))

    if graph.is_output(node.name) or not all(weights_unused(graph.by_name[u]) for u in graph.users(node.name)):
        return None
    query, key, value = node.args[:3]
    shapes = [graph.shape_of(t) for t in (query, key, value)]
    embed, heads = at.get("embed_dim"), at.get("num_heads")
    if any(s is None or len(s) != 3 or s[-1] != embed for s in shapes) or shapes[1] != shapes[2]:
        return None
    seq = (lambda s: (s[1], s[0])) if at.get("batch_first") else (lambda s: (s[0], s[1]))  # (length, batch)
    (m, b), (n, b_k) = seq(shapes[0]), seq(shapes[1])
    d = embed // heads
    if b != b_k or d not in (16, 32, 64, 128) or not (isinstance(query, Ref) and is_float(graph.by_name[query.name])):
        return None
    return Region("attention", "flash_attention", node,
                  extra={"q": query, "k": key, "v": value, "scale": d ** -0.5, "causal": False, "covers": [],
                         "pattern": False, "dims": (b, heads, m, n, d), "multihead": node.module})


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
    precision = params.get("dot_precision", "ieee")
    if precision not in DOT_PRECISIONS:
        raise ValueError(f"dot_precision {precision!r}: use one of {DOT_PRECISIONS}")
    if precision == "ieee":
        block_m, block_n = params.get("BLOCK_M", 64 if d <= 64 else 32), params.get("BLOCK_N", 32)
    else:  # tensor-core tiles: 64 x 64 scores per step; fp32 operands double the registers of fp16's 128
        block_m, block_n = params.get("BLOCK_M", 64 if d <= 128 else 32), params.get("BLOCK_N", 64 if d <= 64 else 32)
    warps = params.get("num_warps", 4)
    stages = params.get("num_stages", 2)
    launch = [f"    grid = (triton.cdiv({m}, {block_m}), {b * h})",
              f"    {name}_kernel[grid](q, k, v, out, SCALE={float(region.extra['scale'])!r}, M={m}, N={n}, "
              f"D={d}, CAUSAL={bool(region.extra['causal'])}, BLOCK_M={block_m}, BLOCK_N={block_n}, "
              f"PRECISION={precision!r}, num_warps={warps}, num_stages={stages})"]
    if region.extra.get("multihead"):
        inputs, src = _multihead_launcher(name, region, launch)
    else:
        inputs, src = _attention_launcher(name, region, launch)
    wide = wide_index((b, h, m, d), (b, h, n, d))
    kernel = KERNEL.format(name=name, pid0=program_id(0, wide), pid1=program_id(1, wide))
    return KernelUnit(name, kernel, "\n".join(src) + "\n", inputs, [region.anchor.name],
                      {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_warps": warps, "num_stages": stages,
                       "dot_precision": precision},
                      region.technique)


def _attention_launcher(name: str, region: Region, launch: list[str]) -> tuple[list[Any], list[str]]:
    """q, k and v as they are, made contiguous."""
    b, h, m, n, d = region.extra["dims"]
    q, k, v = region.extra["q"], region.extra["k"], region.extra["v"]
    names = [arg_name(t) for t in (q, k, v)]
    if len(set(names)) < 3:
        names = [f"{x}_{i}" for i, x in enumerate(names)]
    src = [f"def {name}({', '.join(names)}):"]
    src.append(f"    q, k, v = {', '.join(f'{nm}.contiguous()' for nm in names)}")  # one statement: names may cross
    src += [f"    out = torch.empty(({b}, {h}, {m}, {d}), device=q.device, dtype=q.dtype)", *launch, "    return out"]
    return [q, k, v], src


def _multihead_launcher(name: str, region: Region, launch: list[str]) -> tuple[list[Any], list[str]]:
    """nn.MultiheadAttention's own steps around the kernel: the packed input projection, heads split
    out as (batch, heads, length, head_dim), the output projection; (output, None) is returned in
    the layer's place, the weights being unused."""
    b, h, m, n, d = region.extra["dims"]
    module, at = region.extra["multihead"], region.anchor.attrs
    e = h * d
    biases = {"b_in": Attr(f"{module}.in_proj_bias") if at.get("has_in_proj_bias") else None,
              "b_out": Attr(f"{module}.out_proj.bias") if at.get("has_out_proj_bias") else None}
    present = [k for k, bias in biases.items() if bias is not None]
    given = [region.extra[x] for x in "qkv"]
    sources = list(dict.fromkeys(given))  # query, key and value, each tensor once
    xs = [f"x{i}" for i in range(len(sources))]
    inputs = [*sources, Attr(f"{module}.in_proj_weight"), Attr(f"{module}.out_proj.weight"), *(biases[k] for k in present)]
    src = [f"def {name}({', '.join([*xs, 'w_in', 'w_out', *present])}):"]
    src += [f"    {k} = None" for k in biases if k not in present]
    if at.get("batch_first"):  # the layer works on (length, batch, embed)
        src += [f"    {x} = {x}.transpose(0, 1)" for x in xs]
    q_in, k_in, v_in = (xs[sources.index(t)] for t in given)
    if len(sources) == 1:
        src.append(f"    q, k, v = F.linear({q_in}, w_in, b_in).chunk(3, dim=-1)")
    else:
        src += ["    w_q, w_k, w_v = w_in.chunk(3)",
                "    b_q, b_k, b_v = b_in.chunk(3) if b_in is not None else (None, None, None)",
                f"    q, k, v = F.linear({q_in}, w_q, b_q), F.linear({k_in}, w_k, b_k), F.linear({v_in}, w_v, b_v)"]
    src += [f"    q = q.reshape({m}, {b * h}, {d}).transpose(0, 1).reshape({b}, {h}, {m}, {d}).contiguous()",
            f"    k = k.reshape({n}, {b * h}, {d}).transpose(0, 1).reshape({b}, {h}, {n}, {d}).contiguous()",
            f"    v = v.reshape({n}, {b * h}, {d}).transpose(0, 1).reshape({b}, {h}, {n}, {d}).contiguous()",
            f"    out = torch.empty(({b}, {h}, {m}, {d}), device=q.device, dtype=q.dtype)", *launch,
            f"    out = F.linear(out.permute(2, 0, 1, 3).reshape({m * b}, {e}), w_out, b_out).view({m}, {b}, {e})"]
    src.append("    return out.transpose(0, 1), None" if at.get("batch_first") else "    return out, None")
    return inputs, src


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    return attention_unit(name, region, how.graph, how.params)


class FlashAttention(AnchorRecipe):
    id = "flash_attention"
    summary = "scaled dot-product attention as one tiled kernel with online softmax (no S x S matrix)"
    templates = {"attention": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return attention_region(node, graph)

    def absent_reason(self) -> str:
        return ("no scaled_dot_product_attention call, matmul-softmax-matmul pattern or nn.MultiheadAttention "
                "layer without mask/dropout (and, for the layer, with its attention weights unused)")


RECIPE = FlashAttention()
