"""gemm_epilogue_fusion: a GEMM or convolution with its epilogue (bias, activation, scaling, residual).

Default backend: the product stays on cuBLAS / cuDNN (called without its bias) and one Triton
pass applies bias + the whole pointwise epilogue, replacing the bias kernel and every
activation/scale/residual kernel eager PyTorch launches. Backend "triton" (linear and 2-d
matmul only): a tiled Triton GEMM with the epilogue applied to the accumulator in registers,
tiles visited in groups of GROUP_M rows so the operands' tiles are reused from L2. Its dots are
exact fp32 (`dot_precision="ieee"`, CUDA cores) or "tf32x3": each fp32 operand split into a
TF32 high part and a TF32 remainder, three tensor-core products summed, which keeps fp32
accuracy (error ~2^-22 relative per product, fp32 tolerances hold) at tensor-core speed,
where plain fp32 cuBLAS (TF32 off, PyTorch's default) runs on CUDA cores, or "tf32": one TF32
product (~1e-3 relative error), for tolerances that admit it.
"""

from __future__ import annotations

from typing import Any

from kskill.agents.recipes.base import AnchorRecipe, Lowering
from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.kernel_fusion import body_shape, default_params
from kskill.agents.recipes.matching import is_float
from kskill.agents.recipes.regions import Region, is_pointwise
from kskill.agents.recipes.templates.common import (
    MEMORY_FORMATS, Body, body_comment, channels_last_order, emit_body, indent, numel, operand_key, program_id,
    to_channels_last, wide_index)
from kskill.agents.recipes.templates.unit import (
    KernelUnit, alloc, arg_name, pointer_args, prepare, store_cast)

CONV_OPS = ("conv1d", "conv2d", "conv3d")
TRANSPOSED_CONV_OPS = ("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
GEMM_OPS = ("linear", "matmul", *CONV_OPS, *TRANSPOSED_CONV_OPS)
# Convolutions with a channels-last memory format in torch (2-d and 3-d, plain and transposed).
CHANNELS_LAST_OPS = ("conv2d", "conv3d", "conv_transpose2d", "conv_transpose3d")


def gemm_region(node: Node, graph: Graph) -> Region | None:
    if node.op not in GEMM_OPS or not is_float(node):
        return None
    if node.op == "matmul":
        a, b = node.args[:2] if len(node.args) >= 2 else (None, None)
        if not all(isinstance(x, (Ref, Attr)) for x in (a, b)):
            return None
        if len(graph.shape_of(a) or ()) < 2 or len(graph.shape_of(b) or ()) < 2:
            return None
    elif node.module is None:
        return None  # functional linear/conv calls keep their own text
    if node.op.startswith("conv") and node.attrs.get("padding_mode", "zeros") != "zeros":
        return None
    # Only a pointwise user can become the epilogue, and without one only a convolution's bias is work
    # to fuse; a bare product claimed here would be dropped later, after keeping other recipes (a batch
    # norm taking its convolution over, a depthwise stencil) from claiming it.
    users = graph.users(node.name)
    epilogue_user = not graph.is_output(node.name) and any(is_pointwise(graph.by_name[u], graph) for u in users)
    conv_bias = node.op.startswith("conv") and node.attrs.get("has_bias")
    if not epilogue_user and not conv_bias:
        return None
    return Region("gemm", "gemm_epilogue_fusion", node,
                  extra={"output": node.name, "has_bias_work": bool(conv_bias)})


ACC = "__acc__"
DOT_PRECISIONS = ("ieee", "tf32x3", "tf32")


def anchor_inputs(anchor: Node) -> tuple[Any, Any, Any]:
    """(input, weight, bias) operands of a linear / conv module or matmul call."""
    if anchor.module is not None:
        bias = Attr(f"{anchor.module}.bias") if anchor.attrs.get("has_bias") else None
        return anchor.args[0], Attr(f"{anchor.module}.weight"), bias
    return anchor.args[0], anchor.args[1], None


def product_text(anchor: Node, a: str, w: str, bias: str = "None") -> str:
    """PyTorch text for the product (without its bias unless `bias` names it)."""
    if anchor.op == "linear":
        return f"torch.nn.functional.linear({a}, {w})"
    at = anchor.attrs
    if anchor.op in CONV_OPS:
        return (f"torch.nn.functional.{anchor.op}({a}, {w}, {bias}, {at['stride']!r}, {at['padding']!r}, "
                f"{at['dilation']!r}, {at['groups']})")
    if anchor.op in TRANSPOSED_CONV_OPS:
        return (f"torch.nn.functional.{anchor.op}({a}, {w}, {bias}, {at['stride']!r}, {at['padding']!r}, "
                f"{at['output_padding']!r}, {at['groups']}, {at['dilation']!r})")
    return f"torch.matmul({a}, {w})"


def epilogue_body(anchor: Node, graph: Graph, epilogue: Body | None) -> Body:
    """The epilogue with the anchor's bias add as its first node (reading the raw product)."""
    _, _, bias = anchor_inputs(anchor)
    shape = tuple(anchor.shape)
    if bias is not None:
        bshape = (shape[1],) + (1,) * (len(shape) - 2) if anchor.op.startswith("conv") else (shape[-1],)
        first = Node(anchor.name, "add", (Ref(ACC), bias), {"arg_shapes": {0: shape, 1: bshape}},
                     shape, anchor.dtype)
    else:
        first = Node(anchor.name, "identity", (Ref(ACC),), {"arg_shapes": {0: shape}}, shape, anchor.dtype)
    nodes = [first] + (list(epilogue.nodes) if epilogue else [])
    outputs = list(epilogue.outputs) if epilogue else [anchor.name]
    return Body(nodes, shape, outputs)


def gemm_unit(name: str, anchor: Node, epilogue: Body | None, graph: Graph, params: dict[str, Any], *,
              nhwc: bool = False, vectorized: bool = False, contiguous: frozenset[str] = frozenset()) -> KernelUnit:
    backend = params.get("gemm_backend", "cublas")
    body = epilogue_body(anchor, graph, epilogue)
    if backend == "triton" and anchor.op in ("linear", "matmul") and len(anchor.shape) == 2:
        return triton_gemm(name, anchor, body, graph, params, "gemm_epilogue_fusion")
    return _cublas_epilogue(name, anchor, body, graph, params, nhwc, vectorized, contiguous)


def _cublas_epilogue(name: str, anchor: Node, body: Body, graph: Graph, params: dict[str, Any],
                     nhwc: bool, vectorized: bool, contiguous: frozenset[str] = frozenset()) -> KernelUnit:
    """`contiguous`: outputs returned in NCHW (after a channels-last pass, for a consumer that needs it)."""
    p = {**default_params(body.domain, vectorized), **{k: v for k, v in params.items() if k in ("BLOCK", "num_warps")}}
    a, w, _ = anchor_inputs(anchor)
    ext = [op for op in body.external(graph) if not (isinstance(op, Ref) and op.name == ACC)]
    ptrs = pointer_args(ext)
    ptrs[ACC] = "acc_ptr"
    perm = channels_last_order(len(body.domain), nhwc)
    emitted = emit_body(body, graph, ptrs, "offs", "mask", perm=perm)
    n = numel(body.domain)
    outs = [graph.by_name[o] if o in graph.by_name else body.nodes[0] for o in body.outputs]
    lines = [f"offs = {program_id(0, wide_index(body.domain))} * BLOCK + tl.arange(0, BLOCK)",
             "mask = offs < NUMEL"] + emitted.lines
    for i, node in enumerate(outs):
        lines.append(f"tl.store(out{i}_ptr + offs, {emitted.var_of[node.name]}.to({store_cast(node.dtype)}), mask=mask)")
    kargs = ["acc_ptr"] + [ptrs[k] for k in ptrs if k != ACC] + [f"out{i}_ptr" for i in range(len(outs))]
    kernel = (f"@triton.jit\ndef {name}_kernel({', '.join(kargs)}, NUMEL: tl.constexpr, BLOCK: tl.constexpr):\n"
              f'    """Epilogue of {anchor.op} {anchor.name}: {body_comment(body)}."""\n{indent(lines, 4)}\n')
    launcher_inputs = [a, w] + [op for op in ext if op not in (a, w)]
    params_names = [arg_name(op) for op in launcher_inputs]
    src = [f"def {name}({', '.join(params_names)}):"]
    if perm is not None:  # cuDNN's channels-last kernels, and the epilogue walks their output in place
        fmt = MEMORY_FORMATS[len(perm)]
        src.append(f"    {arg_name(a)} = {to_channels_last(arg_name(a))}")
        src.append(f"    {arg_name(w)} = {arg_name(w)}.contiguous(memory_format={fmt})")
    src.append(f"    acc = {product_text(anchor, arg_name(a), arg_name(w))}  # cuBLAS/cuDNN, no bias")
    if perm is not None:
        src.append(f"    acc = acc.permute{perm}.contiguous()")
    else:
        src.append("    acc = acc.contiguous()")
    for op in ext:
        if op in (a, w):
            continue
        src.append(f"    {arg_name(op)} = {prepare(op, graph, body.domain, nhwc, body_shape(body, graph, op))}")
    for i, node in enumerate(outs):
        src.append(f"    out{i} = {alloc(tuple(node.shape), node.dtype, 'acc', nhwc)}")
    call = ["acc"] + [arg_name(op) for op in ext] + [f"out{i}" for i in range(len(outs))]
    src.append(f"    {name}_kernel[(triton.cdiv({n}, {p['BLOCK']}),)]({', '.join(call)}, NUMEL={n}, "
               f"BLOCK={p['BLOCK']}, num_warps={p['num_warps']})")
    back = [f"out{i}.contiguous()" if o in contiguous else f"out{i}" for i, o in enumerate(body.outputs)]
    src.append(f"    return {', '.join(back)}")
    used = {"gemm_backend": "cublas", "BLOCK": p["BLOCK"], "num_warps": p["num_warps"]}
    return KernelUnit(name, kernel, "\n".join(src) + "\n", launcher_inputs, list(body.outputs), used,
                      "gemm_epilogue_fusion")


def triton_gemm(name: str, anchor: Node, body: Body, graph: Graph, params: dict[str, Any],
                technique: str, triangle: tuple[str, int] | None = None) -> KernelUnit:
    """A tiled Triton GEMM of a 2-d linear/matmul `anchor` with `body` applied to the accumulator.

    The operands are read through their strides, so a transposed or sliced view (x.T, W of
    nn.Linear as (N, K)) is indexed in place instead of copied; only an operand the epilogue
    reads too is made contiguous, since the epilogue indexes it like the output.
    `triangle` ("lower" or "upper", diagonal): the product is kept only on that side of the diagonal,
    as torch.tril / torch.triu keep it; tiles wholly on the other side skip their K loop and store zeros."""
    a, w, _ = anchor_inputs(anchor)
    m, n = anchor.shape
    k = graph.shape_of(a)[-1]
    precision = params.get("dot_precision", "ieee")
    if precision not in DOT_PRECISIONS:
        raise ValueError(f"dot_precision {precision!r}: use one of {DOT_PRECISIONS}")
    big = precision != "ieee"  # tensor-core tiles; CUDA-core fp32 dots keep smaller tiles
    bm, bn = params.get("BLOCK_M", 128 if big else 64), params.get("BLOCK_N", 128 if big else 64)
    bk = params.get("BLOCK_K", 32)
    warps, stages = params.get("num_warps", 8 if big else 4), params.get("num_stages", 3)
    group = params.get("GROUP_M", 8)
    ext = [op for op in body.external(graph) if not (isinstance(op, Ref) and op.name == ACC)]
    others = [op for op in ext if op not in (a, w)]
    ptrs = pointer_args(others)
    ptrs[ACC] = "acc_ptr_unused"
    read_by_epilogue = [op for op in (a, w) if op in ext]  # a residual of x, say
    for operand, ptr in ((a, "a_ptr"), (w, "w_ptr")):
        if operand in read_by_epilogue:
            ptrs[operand_key(operand)] = ptr
    emitted = emit_body(body, graph, ptrs, "offs", "mask", provided={ACC: "acc"})
    outs = [graph.by_name[o] if o in graph.by_name else body.nodes[0] for o in body.outputs]
    wide = wide_index((m, k), (k, n), (m, n))  # program ids in int64 make rm, rn and every offset int64
    lines = [
        f"pid = {program_id(0, wide)}", "tiles_m = tl.cdiv(M, BLOCK_M)", "tiles_n = tl.cdiv(N, BLOCK_N)",
        "first_m = (pid // (GROUP_M * tiles_n)) * GROUP_M", "rows_in_group = tl.minimum(tiles_m - first_m, GROUP_M)",
        "pid_m = first_m + (pid % (GROUP_M * tiles_n)) % rows_in_group",
        "pid_n = (pid % (GROUP_M * tiles_n)) // rows_in_group",
        "rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)", "rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        *_triangle_skip(triangle),
        f"for k0 in range(0, {'k_end' if triangle else 'K'}, BLOCK_K):",
        "    kk = k0 + tl.arange(0, BLOCK_K)",
        "    a = tl.load(a_ptr + rm[:, None] * stride_am + kk[None, :] * stride_ak,",
        "                mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)",
        "    b = tl.load(w_ptr + kk[:, None] * stride_wk + rn[None, :] * stride_wn,",
        "                mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)",
        f'    acc += tl.dot(a, b, input_precision="{precision}")',
        *_triangle_mask(triangle),
        "offs = rm[:, None] * N + rn[None, :]", "mask = (rm[:, None] < M) & (rn[None, :] < N)",
    ] + emitted.lines
    for i, node in enumerate(outs):
        lines.append(f"tl.store(out{i}_ptr + offs, {emitted.var_of[node.name]}.to({store_cast(node.dtype)}), mask=mask)")
    kargs = ["a_ptr", "w_ptr"] + [ptrs[operand_key(op)] for op in others] + [f"out{i}_ptr" for i in range(len(outs))]
    kernel = (f"@triton.jit\ndef {name}_kernel({', '.join(kargs)}, stride_am, stride_ak, stride_wk, stride_wn, "
              "M: tl.constexpr, N: tl.constexpr, "
              "K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, "
              "GROUP_M: tl.constexpr):\n"
              f'    """fp32 GEMM ({precision} dots) of {anchor.name} with its epilogue in registers: {body_comment(body)}."""\n'
              f"{indent(lines, 4)}\n")
    launcher_inputs = [a, w] + others
    src = [f"def {name}({', '.join(arg_name(op) for op in launcher_inputs)}):"]
    for op in launcher_inputs:
        if op in others or op in read_by_epilogue:
            src.append(f"    {arg_name(op)} = {prepare(op, graph, None, False)}")
    for i, node in enumerate(outs):
        src.append(f"    out{i} = {alloc((m, n), node.dtype, arg_name(a))}")
    wk, wn = (1, 0) if anchor.op == "linear" else (0, 1)  # nn.Linear keeps W as (N, K)
    strides = [f"{arg_name(a)}.stride(0)", f"{arg_name(a)}.stride(1)",
               f"{arg_name(w)}.stride({wk})", f"{arg_name(w)}.stride({wn})"]
    call = [arg_name(op) for op in launcher_inputs] + [f"out{i}" for i in range(len(outs))] + strides
    grid = (-(-m // bm) * -(-n // bn),)
    src.append(f"    {name}_kernel[{grid}]({', '.join(call)}, M={m}, N={n}, K={k}, BLOCK_M={bm}, BLOCK_N={bn}, "
               f"BLOCK_K={bk}, GROUP_M={group}, num_warps={warps}, num_stages={stages})")
    src.append(f"    return {', '.join(f'out{i}' for i in range(len(outs)))}")
    used = {"gemm_backend": "triton", "dot_precision": precision, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
            "GROUP_M": group, "num_warps": warps, "num_stages": stages}
    return KernelUnit(name, kernel, "\n".join(src) + "\n", launcher_inputs, list(body.outputs), used, technique)


def _triangle_skip(triangle: tuple[str, int] | None) -> list[str]:
    """A tile wholly on the zeroed side of the diagonal runs no K loop (k_end = 0)."""
    if triangle is None:
        return []
    side, diagonal = triangle
    if side == "lower":  # kept: col <= row + diagonal; zero when the first column passes the last row's bound
        zero = f"pid_n * BLOCK_N > pid_m * BLOCK_M + BLOCK_M - 1 + {diagonal}"
    else:  # kept: col >= row + diagonal; zero when the last column is before the first row's bound
        zero = f"pid_n * BLOCK_N + BLOCK_N - 1 < pid_m * BLOCK_M + {diagonal}"
    return [f"k_end = tl.where({zero}, 0, K)"]


def _triangle_mask(triangle: tuple[str, int] | None) -> list[str]:
    if triangle is None:
        return []
    side, diagonal = triangle
    keep = "<=" if side == "lower" else ">="
    return [f"acc = tl.where(rn[None, :] {keep} rm[:, None] + {diagonal}, acc, 0.0)"]


def lower(name: str, region: Region, how: Lowering) -> KernelUnit:
    use_nhwc = how.nhwc and region.anchor.op in CHANNELS_LAST_OPS
    contiguous = frozenset(region.extra.get("contiguous_outputs", ())) if use_nhwc else frozenset()
    return gemm_unit(name, region.anchor, region.epilogue, how.graph, how.params, nhwc=use_nhwc,
                     vectorized=how.vectorized, contiguous=contiguous)


class GemmEpilogueFusion(AnchorRecipe):
    id = "gemm_epilogue_fusion"
    summary = "GEMM/convolution on cuBLAS/cuDNN + bias and the pointwise epilogue in one Triton kernel"
    templates = {"gemm": lower}

    def match(self, node: Node, graph: Graph) -> Region | None:
        return gemm_region(node, graph)

    def absent_reason(self) -> str:
        return "no linear/matmul/conv followed by pointwise ops (or a conv bias) in the reference"


RECIPE = GemmEpilogueFusion()
