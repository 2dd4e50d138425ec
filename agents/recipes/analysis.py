"""Static matching of graph nodes to regions, and the preconditions each recipe checks.

Every matcher returns a Region when the node can be lowered by its template with exact
PyTorch semantics (training-mode batch norm included), or None, so recipes decline rather
than emit a kernel that changes behaviour.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.graph import Attr, Graph, Node, Ref
from kskill.agents.recipes.pointwise_ops import is_identity_dropout
from kskill.agents.recipes.regions import Region

FLOATS = ("torch.float32", "torch.float16", "torch.bfloat16")
GEMM_OPS = ("linear", "matmul", "conv1d", "conv2d", "conv3d")
REDUCE_OPS = ("sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod")
ROW_OPS = ("softmax", "log_softmax", "layer_norm", "group_norm", "instance_norm", "batch_norm") + REDUCE_OPS
RANDOM_OR_SYNC = ("dropout", "rand", "randn", "rand_like", "randn_like", "bernoulli", "multinomial",
                  "nonzero", "item", "tolist", "unique", "masked_select", "randint", "normal")
MAX_PERSISTENT_COLUMN = 4096  # softmax over a strided dim keeps the whole dim in registers


def _float(node: Node) -> bool:
    return str(node.dtype) in FLOATS


def first_operand(node: Node) -> Any:
    return node.args[0] if node.args else node.attrs.get("input")


def normalise_dims(dims: Any, rank: int) -> tuple[int, ...] | None:
    """Sorted non-negative dims, or None for 'all'."""
    if dims is None:
        return tuple(range(rank))
    if isinstance(dims, int):
        dims = (dims,)
    if not isinstance(dims, (tuple, list)) or not all(isinstance(d, int) for d in dims):
        return None
    return tuple(sorted(d % rank for d in dims)) if rank else ()


def prq(shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, int, int] | None:
    """View `shape` as (P, R, Q) with R the product of `dims`; None unless dims are contiguous."""
    if not dims:
        return None
    if list(dims) != list(range(dims[0], dims[-1] + 1)):
        return None
    p = math.prod(shape[:dims[0]])
    r = math.prod(shape[dims[0]:dims[-1] + 1])
    q = math.prod(shape[dims[-1] + 1:])
    return p, r, q


def gemm_region(node: Node, graph: Graph) -> Region | None:
    if node.op not in GEMM_OPS or not _float(node):
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
    users = graph.users(node.name)
    has_pointwise_user = bool(users) and not graph.is_output(node.name)
    conv_bias = node.op.startswith("conv") and node.attrs.get("has_bias")
    if not has_pointwise_user and not conv_bias:
        return None
    return Region("gemm", "gemm_epilogue_fusion", node,
                  extra={"output": node.name, "has_bias_work": bool(conv_bias)})


def softmax_region(node: Node, graph: Graph) -> Region | None:
    if node.op not in ("softmax", "log_softmax") or not _float(node) or node.attrs.get("dtype"):
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


def norm_region(node: Node, graph: Graph) -> Region | None:
    if not _float(node) or node.shape is None or node.module is None:
        return None
    shape, at = node.shape, node.attrs
    x = first_operand(node)
    w = Attr(f"{node.module}.weight") if at.get("has_weight") else None
    b = Attr(f"{node.module}.bias") if at.get("has_bias") else None
    extra: dict[str, Any] = {"prologue_operand": x, "eps": float(at.get("eps", 1e-5)), "weight": w, "bias": b}
    if node.op == "layer_norm":
        k = len(at["normalized_shape"])
        extra.update(view=(math.prod(shape[:-k]), math.prod(shape[-k:]), 1), affine_index="r")
        return Region("norm", "fused_normalization", node, extra=extra)
    if node.op == "group_norm" and len(shape) >= 2:
        n, c, inner = shape[0], shape[1], math.prod(shape[2:])
        g = at["num_groups"]
        extra.update(view=(n * g, (c // g) * inner, 1), affine_index=f"channel:{c // g}:{inner}:{g}")
        return Region("norm", "fused_normalization", node, extra=extra)
    if node.op == "instance_norm" and len(shape) >= 3:
        if at.get("track_running_stats"):
            return None  # running-statistics update of instance norm: left to PyTorch
        n, c, inner = shape[0], shape[1], math.prod(shape[2:])
        extra.update(view=(n * c, inner, 1), affine_index=f"row_channel:{c}")
        return Region("norm", "fused_normalization", node, extra=extra)
    if node.op == "batch_norm" and len(shape) >= 2:
        training = at.get("training", True) or not at.get("track_running_stats", True)
        if training and at.get("track_running_stats", True) and at.get("momentum") is None:
            return None  # cumulative averaging needs num_batches_tracked on the host: left to PyTorch
        extra.update(training=training, momentum=at.get("momentum"), module=node.module,
                     track=bool(at.get("track_running_stats", True)))
        return Region("batch_norm", "fused_normalization", node, extra=extra)
    return None


def reduce_region(node: Node, graph: Graph) -> Region | None:
    if node.op not in REDUCE_OPS or node.shape is None and not node.multi:
        return None
    x = first_operand(node)
    xshape = graph.shape_of(x)
    if not isinstance(x, (Ref, Attr)) or xshape is None or str(graph.dtype_of(x)) not in FLOATS:
        return None
    dim = node.attrs.get("dim", node.args[1] if len(node.args) > 1 and isinstance(node.args[1], (int, tuple, list)) else None)
    if node.attrs.get("dtype") is not None:
        return None
    dims = normalise_dims(dim, len(xshape))
    view = prq(tuple(xshape), dims) if dims is not None else None
    if view is None:
        return None
    op, output = node.op, node.name
    covers: list[str] = []
    if node.multi:  # torch.max(x, dim) -> (values, indices): only the values may be used
        users = [graph.by_name[u] for u in graph.users(node.name)]
        if not users or any(u.op != "getitem" or u.args[1] != 0 for u in users) or len(users) != 1:
            return None
        output = users[0].name
        covers = [output]
    elif op in ("max", "min") and dim is not None:
        return None
    op = {"max": "amax", "min": "amin"}.get(op, op)
    out_node = graph.by_name[output]
    return Region("reduce", "triton_reduction", node,
                  extra={"view": view, "reduce": op, "output": output, "covers": covers,
                         "out_shape": tuple(out_node.shape or ()), "prologue_operand": x})


def scan_region(node: Node, graph: Graph) -> Region | None:
    if node.op not in ("cumsum", "cumprod") or not _float(node) or node.attrs.get("dtype"):
        return None
    dim = node.attrs.get("dim", node.args[1] if len(node.args) > 1 else None)
    if dim is None:
        return None
    view = prq(node.shape, normalise_dims(dim, len(node.shape)))
    if view is None:
        return None
    return Region("scan", "fused_scan", node, extra={"view": view, "prologue_operand": first_operand(node)})


POOL_OPS = {f"{kind}_pool{d}d": (kind, d) for kind in ("max", "avg") for d in (1, 2, 3)}
GLOBAL_POOL_OPS = {f"adaptive_{kind}_pool{d}d": (kind, d) for kind in ("max", "avg") for d in (1, 2, 3)}


def _tuple(v: Any, dims: int) -> tuple[int, ...] | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * dims
    if isinstance(v, (tuple, list)) and len(v) == dims and all(isinstance(x, int) for x in v):
        return tuple(v)
    return None


def _arg(node: Node, name: str, position: int, default: Any = None) -> Any:
    if name in node.attrs:
        return node.attrs[name]
    return node.args[position] if len(node.args) > position else default


def pool_region(node: Node, graph: Graph) -> Region | None:
    """Max / average pooling over 1-3 trailing spatial dims (exact PyTorch semantics: padding,
    dilation, ceil_mode, count_include_pad, divisor_override), and adaptive pooling whose windows
    are all alike: a global pool is a row reduction over the spatial dims; an output size that
    divides the input is a pooling window of input / output."""
    if not _float(node) or node.shape is None:
        return None
    x = first_operand(node)
    xshape = graph.shape_of(x)
    if node.op in GLOBAL_POOL_OPS:
        kind, dims = GLOBAL_POOL_OPS[node.op]
        size = _tuple(_arg(node, "output_size", 1), dims)
        if xshape is None or size is None or len(xshape) < dims + 1 or node.multi:
            return None
        spatial = tuple(xshape[-dims:])
        if size == (1,) * dims:  # one window over everything: a reduction over the innermost dims
            rows = math.prod(xshape[:-dims])
            return Region("reduce", "fused_pooling", node,
                          extra={"view": (rows, math.prod(spatial), 1), "reduce": "mean" if kind == "avg" else "amax",
                                 "output": node.name, "covers": [], "out_shape": tuple(node.shape),
                                 "prologue_operand": x})
        if any(i % o for i, o in zip(spatial, size)):
            return None  # uneven adaptive windows overlap and vary in size: left to PyTorch
        kernel = tuple(i // o for i, o in zip(spatial, size))
        return _window_region(node, x, kind, kernel, kernel, (0,) * dims, (1,) * dims, True, None)
    if node.op not in POOL_OPS or xshape is None:
        return None
    kind, dims = POOL_OPS[node.op]
    if len(xshape) < dims + 1 or _arg(node, "return_indices", 99, False):
        return None
    kernel = _tuple(_arg(node, "kernel_size", 1), dims)
    stride_v = _arg(node, "stride", 2)
    stride = kernel if stride_v in (None, [], ()) else _tuple(stride_v, dims)
    pad = _tuple(_arg(node, "padding", 3, 0), dims)
    dilation = _tuple(_arg(node, "dilation", 4, 1), dims) if kind == "max" else (1,) * dims
    if None in (kernel, stride, pad, dilation):
        return None
    include_pad = bool(_arg(node, "count_include_pad", 5, True)) if kind == "avg" else True
    override = _arg(node, "divisor_override", 6, None) if kind == "avg" else None
    if override is not None and (not isinstance(override, int) or override == 0):
        return None
    return _window_region(node, x, kind, kernel, stride, pad, dilation, include_pad, override)


def _window_region(node: Node, x: Any, kind: str, kernel: tuple[int, ...], stride: tuple[int, ...],
                   pad: tuple[int, ...], dilation: tuple[int, ...], include_pad: bool,
                   override: int | None) -> Region | None:
    if math.prod(kernel) > 512:
        return None  # a window this large unrolls into a kernel too big to compile quickly
    return Region("pool", "fused_pooling", node,
                  extra={"kernel": kernel, "stride": stride, "pad": pad, "dilation": dilation, "mode": kind,
                         "count_include_pad": include_pad, "divisor_override": override, "prologue_operand": x})


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
    if any(s is None or len(s) != 4 for s in shapes) or not _float(node):
        return None
    (b, h, m, d), (_, _, n, dk), (_, _, _, dv) = shapes
    if d != dk or d not in (16, 32, 64, 128) or dv != d or shapes[0][:2] != shapes[1][:2]:
        return None
    return Region("attention", "flash_attention", node,
                  extra={"q": q, "k": k, "v": v, "scale": scale if scale is not None else d ** -0.5,
                         "causal": causal, "covers": covers, "pattern": pattern, "dims": (b, h, m, n, d)})


def graph_capture_blocker(graph: Graph) -> str | None:
    """Why the forward cannot be captured as a CUDA graph, or None."""
    if not graph.inputs():
        return "the forward takes no tensor input"
    for node in graph.nodes:
        if node.op in RANDOM_OR_SYNC and not (node.op == "dropout" and is_identity_dropout(node)):
            return f"{node.name} ({node.op}) is random or synchronises with the host"
        if node.op == "input" and str(node.dtype) == "None":
            return f"input {node.name} is not a tensor"
    return None


TF32_UNIT_ROUNDOFF = 2.0 ** -11  # TF32 keeps 10 explicit mantissa bits


def tf32_verdicts(graph: Graph, rtol: float) -> dict[str, tuple[bool, str]]:
    """Per fp32 matmul: whether TF32 rounding fits `rtol`, with the estimate.

    Each product a*b picks up relative error about sqrt(2)*u (u = 2^-11, both inputs rounded);
    over K random-sign terms the error and the output both grow as sqrt(K), so the expected
    relative error of an output is about sqrt(2)*u ~ 6.9e-4 whatever K. A 4x margin covers the
    tail over millions of outputs; TF32 is used only if that fits rtol.
    """
    verdicts = {}
    for node in graph.nodes:
        if node.op not in ("linear", "matmul") or str(node.dtype) != "torch.float32":
            continue
        estimate = 4 * math.sqrt(2) * TF32_UNIT_ROUNDOFF
        fits = estimate <= rtol
        verdicts[node.name] = (fits, f"TF32 error ~{estimate:.1e} relative {'<=' if fits else '>'} rtol {rtol:g}")
    return verdicts
