"""Static features of a reference problem, in the Metric vocabulary (a candidate's: candidate_features.py).

The reference, the trusted problem, is constructed (`Model(*get_init_inputs())`, on the meta
device when it allows) and captured with torch.fx, falling back to torch.export and then to its
source text; the method used is recorded as `capture_method`. Every feature name is defined in
graph_schema/skills/metrics.yaml; what cannot be determined is listed as unavailable with why.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import logging
import math
import operator
import types
from dataclasses import dataclass, field
from typing import Any

from kskill.agents import patterns
from kskill.agents.op_graph import ROW_FAMILIES, OpGraph, OpNode
from kskill.graph_schema.model import Scalar


# --- operator families --------------------------------------------------------------------------
# Names are lower-case: nn.Module class names, torch / functional / method names, aten names.

GEMM = frozenset("""linear matmul mm bmm addmm baddbmm addbmm einsum bilinear mv addmv dot tensordot
    inner outer chain_matmul""".split())
# Recurrent layers: a time loop of small GEMMs and gate kernels, one step after another.
RECURRENT = frozenset("""rnn lstm gru rnncell lstmcell grucell rnn_tanh rnn_relu rnn_tanh_cell rnn_relu_cell
    lstm_cell gru_cell""".split())
CONVOLUTION = frozenset("""conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d
    convtranspose1d convtranspose2d convtranspose3d convolution""".split())
ATTENTION = frozenset("""scaled_dot_product_attention multiheadattention multi_head_attention_forward
    scaled_dot_product_flash_attention scaled_dot_product_efficient_attention""".split())
NORMALIZATION = frozenset("""batchnorm1d batchnorm2d batchnorm3d batch_norm native_batch_norm
    native_batch_norm_legit native_batch_norm_legit_functional native_batch_norm_legit_no_training
    layernorm layer_norm native_layer_norm groupnorm group_norm native_group_norm instancenorm1d
    instancenorm2d instancenorm3d instance_norm rmsnorm rms_norm localresponsenorm local_response_norm
    normalize""".split())
SOFTMAX = frozenset("softmax log_softmax logsoftmax softmin".split())
POOLING = frozenset("""maxpool1d maxpool2d maxpool3d avgpool1d avgpool2d avgpool3d adaptiveavgpool1d
    adaptiveavgpool2d adaptiveavgpool3d adaptivemaxpool1d adaptivemaxpool2d adaptivemaxpool3d max_pool1d
    max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices avg_pool1d avg_pool2d avg_pool3d
    adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d
    adaptive_max_pool3d lppool1d lppool2d lp_pool1d lp_pool2d""".split())
SCAN = frozenset("cumsum cumprod cummax cummin logcumsumexp".split())
LOSS = frozenset("""crossentropyloss cross_entropy nllloss nll_loss nll_loss_forward mseloss mse_loss
    l1loss l1_loss smoothl1loss smooth_l1_loss huberloss huber_loss kldivloss kl_div bceloss
    binary_cross_entropy bcewithlogitsloss binary_cross_entropy_with_logits hingeembeddingloss
    hinge_embedding_loss tripletmarginloss triplet_margin_loss cosineembeddingloss cosine_embedding_loss
    marginrankingloss margin_ranking_loss softmarginloss soft_margin_loss multimarginloss multi_margin_loss
    poissonnllloss poisson_nll_loss gaussiannllloss gaussian_nll_loss""".split())
REDUCTION = frozenset("""sum mean amax amin prod var std var_mean std_mean norm vector_norm linalg_norm
    argmax argmin logsumexp all any median nansum nanmean count_nonzero max min""".split())
POINTWISE = frozenset("""relu relu6 gelu sigmoid tanh silu mish elu selu celu leakyrelu leaky_relu hardtanh
    hardsigmoid hardswish softplus softsign tanhshrink softshrink hardshrink threshold logsigmoid prelu
    rrelu glu add sub rsub mul div truediv floordiv floor_divide mod fmod remainder pow neg pos abs exp
    exp2 expm1 log log2 log10 log1p sqrt rsqrt square reciprocal sign sgn clamp clamp_min clamp_max clip
    minimum maximum fmax fmin where sin cos tan asin acos atan atan2 sinh cosh erf erfc erfinv floor ceil
    round trunc frac lerp addcmul addcdiv hypot dropout dropout1d dropout2d dropout3d alphadropout
    feature_alpha_dropout masked_fill to float half bfloat16 double type type_as eq ne lt le gt ge
    logical_and logical_or logical_not logical_xor bitwise_and bitwise_or isnan nan_to_num copysign xlogy
    tril triu iadd isub imul itruediv multiply subtract divide true_divide negative absolute""".split())
DATA_MOVEMENT = frozenset("""contiguous clone copy cat concat concatenate stack repeat repeat_interleave tile
    pad flip roll gather scatter scatter_add index_select embedding index masked_select diag diag_embed
    zeros zeros_like ones ones_like full full_like arange rand randn rand_like randn_like randint eye
    linspace new_zeros new_ones new_full upsample interpolate upsamplingnearest2d upsamplingbilinear2d
    pixelshuffle pixel_shuffle""".split())
VIEW = frozenset("""view reshape flatten unflatten unsqueeze squeeze expand expand_as size dim getattr
    getitem split chunk narrow select unbind t transpose permute movedim swapaxes swapdims as_strided
    view_as identity detach alias numel stride slice unsafe_view empty empty_like new_empty
    sym_size""".split())
LAYOUT = frozenset("transpose permute t movedim swapaxes swapdims contiguous".split())
TRANSCENDENTAL = frozenset("""exp exp2 expm1 log log2 log10 log1p sigmoid tanh gelu silu mish elu selu celu
    softplus sin cos tan asin acos atan atan2 sinh cosh erf erfc erfinv pow sqrt rsqrt logsigmoid
    tanhshrink softmax log_softmax logsoftmax softmin logsumexp logcumsumexp glu norm std
    cross_entropy crossentropyloss""".split())
AFFINE = frozenset("add sub rsub mul div truediv iadd isub imul itruediv neg multiply subtract divide true_divide "
                   "negative".split())

FAMILY_ORDER = (("attention", ATTENTION), ("recurrent", RECURRENT), ("gemm", GEMM), ("convolution", CONVOLUTION),
                ("normalization", NORMALIZATION), ("softmax", SOFTMAX), ("pooling", POOLING), ("scan", SCAN),
                ("loss", LOSS), ("reduction", REDUCTION), ("pointwise", POINTWISE),
                ("data_movement", DATA_MOVEMENT), ("view", VIEW))
# Module attributes the patterns read: normalization shapes, convolution groups, recurrent settings.
MODULE_ATTRS = ("dim", "normalized_shape", "num_groups", "training", "groups", "in_channels", "num_layers",
                "bidirectional", "batch_first")
_OPERATOR_NAMES = {operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
                   operator.floordiv: "floordiv", operator.pow: "pow", operator.neg: "neg",
                   operator.matmul: "matmul", operator.getitem: "getitem", operator.mod: "mod",
                   operator.iadd: "add", operator.imul: "mul", operator.isub: "sub", operator.itruediv: "div"}


def canonical(name: str) -> str:
    """Lower-case op name without in-place or private underscores (`relu_` -> relu, `_softmax` -> softmax)."""
    name = name.lower().rsplit(".", 1)[-1]
    return name.strip("_") or name


def op_family(name: str, has_second_tensor: bool = False) -> str:
    """The family of a canonical op name; 'other' when unknown."""
    if name in ("max", "min") and has_second_tensor:
        return "pointwise"  # torch.max(a, b) is elementwise; torch.max(a, dim) reduces
    for family, names in FAMILY_ORDER:
        if name in names:
            return family
    return "other"


@dataclass
class Features:
    """Feature values by vocabulary name, and the names that could not be determined, with why."""

    values: dict[str, Scalar] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)

    def merged(self, other: Features) -> Features:
        values = {**self.values, **other.values}
        unavailable = {k: v for k, v in {**self.unavailable, **other.unavailable}.items() if k not in values}
        return Features(values, unavailable)


# --- reference: capture ----------------------------------------------------------------------------


@dataclass
class _Loaded:
    model: Any
    inputs: list[Any]


def _load_reference(source: str, device: str) -> _Loaded:
    import torch

    namespace = types.ModuleType("kskill_feature_reference")
    exec(compile(source, "<reference>", "exec"), namespace.__dict__)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(namespace, name):
            raise ValueError(f"the reference defines no `{name}`")
    torch.manual_seed(0)
    with torch.device(device):
        model = namespace.Model(*namespace.get_init_inputs())
        inputs = list(namespace.get_inputs())
    return _Loaded(model, inputs)


def _shape(value: Any) -> tuple[int, ...] | None:
    import torch

    return tuple(int(d) for d in value.shape) if isinstance(value, torch.Tensor) else None


def _nbytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return 0


def _fx_capture(loaded: _Loaded) -> tuple[list[OpNode], Any, float]:
    """Trace with torch.fx and run the graph once under FlopCounterMode, recording every value."""
    import torch
    import torch.fx
    from torch.utils.flop_counter import FlopCounterMode

    from kskill.agents import recurrent_shapes
    from kskill.agents.recipes.capture import trace

    traced = trace(loaded.model)
    values: dict[str, Any] = {}
    recurrent_flops = 0

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            nonlocal recurrent_flops
            shortcut = recurrent_shapes.meta_call(self, n)
            if shortcut is not None:
                result, layer_flops = shortcut
                recurrent_flops += layer_flops
            else:
                result = super().run_node(n)
            values[n.name] = result
            return result

    with FlopCounterMode(display=False) as counter:
        output = Recorder(traced).run(*loaded.inputs)
    modules = dict(traced.named_modules())
    nodes = []
    for n in traced.graph.nodes:
        if n.op in ("placeholder", "get_attr", "output"):
            # the output's inputs are the values the forward returns: uses like any other
            nodes.append(OpNode(n.name, n.op, n.op, [a.name for a in n.all_input_nodes] if n.op == "output" else [],
                                shape=_shape(values.get(n.name)), itemsize=getattr(values.get(n.name), "itemsize", 0)))
            continue
        if n.op == "call_module":
            module = modules[n.target]
            op = canonical(type(module).__name__)
            attrs = {a: getattr(module, a) for a in MODULE_ATTRS if hasattr(module, a)}
            param_operand = any(True for _ in module.parameters(recurse=False))
        else:
            target = n.target
            op = canonical(_OPERATOR_NAMES.get(target, getattr(target, "__name__", str(target))))
            attrs = {k: v for k, v in n.kwargs.items() if not isinstance(v, torch.fx.Node)}
            param_operand = any(isinstance(a, torch.fx.Node) and a.op == "get_attr" for a in n.args)
        tensor_args = [a for a in n.all_input_nodes]
        constants = [a for a in n.args if not isinstance(a, torch.fx.Node)]
        second_tensor = len([a for a in n.args if isinstance(a, torch.fx.Node)]) >= 2
        in_values = [values.get(a.name) for a in tensor_args]
        nodes.append(OpNode(
            n.name, op, op_family(op, second_tensor), [a.name for a in tensor_args], constants, attrs,
            _shape(values[n.name]), [s for v in in_values if (s := _shape(v)) is not None],
            getattr(values[n.name], "itemsize", 0), sum(_nbytes(v) for v in in_values), param_operand))
    return nodes, output, float(counter.get_total_flops() + recurrent_flops)


def _export_capture(loaded: _Loaded) -> tuple[list[OpNode], Any, float]:
    """Capture with torch.export (ATen-level graph); FLOPs from a plain run under FlopCounterMode."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    program = torch.export.export(loaded.model, tuple(loaded.inputs))
    params = set(program.graph_signature.inputs_to_parameters) | set(program.graph_signature.inputs_to_buffers)
    with FlopCounterMode(display=False) as counter:
        output = loaded.model(*loaded.inputs)
    nodes = []
    for n in program.graph.nodes:
        val = n.meta.get("val")
        if n.op in ("placeholder", "output"):
            kind = "get_attr" if n.name in params else n.op
            returned = [a.name for a in n.all_input_nodes] if n.op == "output" else []
            nodes.append(OpNode(n.name, kind, kind, returned, shape=_shape(val), itemsize=getattr(val, "itemsize", 0)))
            continue
        packet = getattr(n.target, "overloadpacket", None)
        op = canonical(getattr(packet, "__name__", None) or _OPERATOR_NAMES.get(n.target, str(n.target)))
        tensor_args = list(n.all_input_nodes)
        in_vals = [a.meta.get("val") for a in tensor_args]
        second_tensor = len([a for a in n.args if isinstance(a, torch.fx.Node)]) >= 2
        nodes.append(OpNode(
            n.name, op, op_family(op, second_tensor), [a.name for a in tensor_args],
            [a for a in n.args if not isinstance(a, torch.fx.Node)], dict(n.kwargs), _shape(val),
            [s for v in in_vals if (s := _shape(v)) is not None], getattr(val, "itemsize", 0),
            sum(_nbytes(v) for v in in_vals), any(a.name in params for a in tensor_args)))
    return nodes, output, float(counter.get_total_flops())


# --- reference: features ---------------------------------------------------------------------------


def _dim_of(node: OpNode) -> Any:
    if "dim" in node.attrs:
        return node.attrs["dim"]
    ints = [c for c in node.constants if isinstance(c, (int, tuple, list)) and not isinstance(c, bool)]
    return ints[0] if ints else None


def _is_last_dim(dim: Any, ndim: int) -> bool:
    dims = dim if isinstance(dim, (tuple, list)) else [dim]
    return len(dims) == 1 and isinstance(dims[0], int) and dims[0] in (-1, ndim - 1)


def _gemm_dims(node: OpNode) -> tuple[int, int, int] | None:
    if node.shape is None or not node.input_shapes or len(node.shape) < 1:
        return None
    n = node.shape[-1]
    m = math.prod(node.shape) // max(n, 1)
    first = node.input_shapes[0]
    if node.op == "addmm" and len(node.input_shapes) >= 2:
        first = node.input_shapes[1]
    k = first[-1] if first else 0
    return (m, n, k) if m and n and k else None


def _reduction_length(node: OpNode) -> int | None:
    if not node.input_shapes or node.shape is None:
        return None
    shape = node.input_shapes[0]
    numel = math.prod(shape)
    if node.family == "softmax" or node.family == "scan":
        dim = _dim_of(node)
        return shape[dim] if isinstance(dim, int) and -len(shape) <= dim < len(shape) else None
    if node.family == "normalization":
        if "normalized_shape" in node.attrs:
            return math.prod(node.attrs["normalized_shape"])
        if "batch" in node.op and len(shape) >= 2:
            return numel // shape[1]
        if "num_groups" in node.attrs and len(shape) >= 2:
            return numel // (shape[0] * node.attrs["num_groups"])
        return shape[-1]
    if node.family == "reduction":
        out = math.prod(node.shape) if node.shape else 1
        return numel // max(out, 1)
    return None


def _through(graph: OpGraph, start: OpNode, allowed: frozenset[str], forward: bool) -> list[OpNode]:
    """Nodes reached from `start` through single-link chains of ops named in `allowed`.

    Going backward, an op with several operands is followed through the one of its own shape: the
    others are broadcast into it (the mask of a masked_fill, a bias)."""
    step = graph.consumers if forward else graph.producers
    reached, current = [], start
    frontier = step(start)
    while frontier:
        if len(frontier) > 1 and not forward:
            frontier = [p for p in frontier if p.shape == current.shape]
        if len(frontier) != 1:
            break
        current = frontier[0]
        reached.append(current)
        if current.op not in allowed:
            break
        frontier = step(current)
    return reached


def _has_attention_pattern(graph: OpGraph) -> bool:
    """matmul -> (pointwise)* -> softmax -> (pointwise)* -> matmul, the first matmul over activations."""
    passing = POINTWISE
    for node in graph.nodes:
        if node.family != "softmax":
            continue
        before = _through(graph, node, passing, forward=False)
        after = _through(graph, node, passing, forward=True)
        if (before and before[-1].family == "gemm" and not before[-1].parameter_operand
                and after and after[-1].family == "gemm"):
            return True
    return False


def _reduced_gemms(graph: OpGraph) -> int:
    """GEMMs whose result reaches a sum or mean over its columns through affine ops alone, or a 1-d average pooling
    over them: the weight's rows can be reduced first (x @ W.sum(0)), a matrix-vector product (or a GEMM of N / k
    columns) in place of the GEMM."""
    count = 0
    for node in graph.nodes:
        if node.family == "gemm" and node.shape is not None:
            chain = _through(graph, node, AFFINE | {"unsqueeze"}, forward=True)
            end = chain[-1] if chain else None
            pooled = end is not None and end.op in ("avg_pool1d", "avgpool1d")
            summed = end is not None and end.op in ("sum", "mean") and _is_last_dim(_dim_of(end), len(node.shape))
            count += pooled or summed
    return count


def _simplifiable_patterns(graph: OpGraph) -> int:
    count = _reduced_gemms(graph)  # sum over a GEMM's columns: reduce the weight first
    for node in graph.nodes:
        if node.family == "gemm":
            chain = _through(graph, node, AFFINE, forward=True)
            end = chain[-1] if chain else None
            if end is not None and end.op == "linear" and node.op == "linear":
                count += 1  # two linear maps with only affine work between them
        if node.op in ("diag", "diag_embed") and any(c.family == "gemm" for c in graph.consumers(node)):
            count += 1  # a diagonal matrix product is a row scaling
        if node.op in ("mul", "div") and len(node.inputs) == 1 and node.constants:
            producers = graph.producers(node)
            prev = producers[0] if len(producers) == 1 else None
            if not (prev and prev.op in ("mul", "div") and len(prev.inputs) == 1 and prev.constants
                    and len(graph.consumers(prev)) == 1):
                next_ = graph.consumers(node)
                if len(next_) == 1 and next_[0].op in ("mul", "div") and len(next_[0].inputs) == 1 \
                        and next_[0].constants:
                    count += 1  # a run of scalar multiplies and divides folds into one constant
    return count + patterns.triangular_gemms(graph)  # tril/triu of a product: its zero tiles need no dots


def _graph_features(nodes: list[OpNode]) -> dict[str, Scalar]:
    graph = OpGraph(nodes)
    compute = graph.compute_nodes()
    fam = [n.family for n in compute]
    groups = graph.pointwise_groups()
    values: dict[str, Scalar] = {
        "op_count": len(compute),
        "est_kernel_launches": len(compute) + sum(patterns.recurrent_launches(n) for n in compute),
        "est_recurrent_launches": sum(patterns.recurrent_launches(n) for n in compute),
        "pointwise_op_count": fam.count("pointwise"),
        "reduction_op_count": fam.count("reduction"),
        "reduction_like_op_count": sum(fam.count(f) for f in ROW_FAMILIES),
        "gemm_op_count": fam.count("gemm"),
        "conv_op_count": fam.count("convolution"),
        "transcendental_op_count": sum(n.op in TRANSCENDENTAL for n in compute),
        "layout_op_count": sum(n.op in LAYOUT for n in nodes),
        "max_pointwise_chain": max(groups.values(), default=0),
        "has_batchnorm": any("batchnorm" in n.op or "batch_norm" in n.op for n in compute),
    }
    for family in ("pointwise", "reduction", "scan", "gemm", "convolution", "normalization", "pooling",
                   "softmax", "loss"):
        values[f"has_{family}"] = family in fam
    values["has_loss"] = values["has_loss"] or patterns.written_out_loss(graph)
    values["has_recurrence"] = "recurrent" in fam
    values["has_attention"] = "attention" in fam or _has_attention_pattern(graph)
    values["has_contraction"] = bool(values["has_gemm"] or values["has_convolution"] or values["has_attention"]
                                     or values["has_recurrence"])
    values["epilogue_chain_after_contraction"] = patterns.epilogue_chain(graph)
    values["row_op_pointwise_chain"] = patterns.row_op_chain(graph)
    values["norm_into_row_op"] = patterns.norm_into_row_op(graph)
    values["triangular_gemm_count"] = patterns.triangular_gemms(graph)
    values["reduced_gemm_count"] = _reduced_gemms(graph)
    width = patterns.min_group_width(graph)
    if width is not None:
        values["conv_min_group_width"] = width
    return values


def _shape_features(nodes: list[OpNode]) -> dict[str, Scalar]:
    graph = OpGraph(nodes)
    compute = graph.compute_nodes()
    values: dict[str, Scalar] = {"simplifiable_patterns": _simplifiable_patterns(graph)}
    gemms = [d for n in compute if n.family == "gemm" and (d := _gemm_dims(n))]
    if gemms:
        m, n_, k = max(gemms, key=lambda d: d[0] * d[1] * d[2])
        values.update(gemm_m=m, gemm_n=n_, gemm_k=k, gemm_mn=m * n_)
    lengths = [r for n in compute if n.family in ROW_FAMILIES and (r := _reduction_length(n))]
    if lengths:
        values["reduction_length"] = max(lengths)
    out_bytes = sum(math.prod(n.shape) * n.itemsize for n in compute if n.shape is not None)
    values["eager_bytes_moved"] = int(out_bytes + sum(n.input_bytes for n in compute))
    return values


def _pointwise_flops(nodes: list[OpNode]) -> int:
    """One FLOP per element of the largest operand of every non-contraction compute op."""
    total = 0
    for n in OpGraph(nodes).compute_nodes():
        if n.family in ("gemm", "convolution", "attention", "data_movement"):
            continue
        sizes = [math.prod(s) for s in [n.shape, *n.input_shapes] if s is not None]
        total += max(sizes, default=0)
    return total


def _problem_values(loaded: _Loaded, output: Any) -> dict[str, Scalar]:
    import torch

    tensors = [t for t in loaded.inputs if isinstance(t, torch.Tensor)]
    params = list(loaded.model.parameters()) + list(loaded.model.buffers())
    outputs = [output] if isinstance(output, torch.Tensor) else [
        t for t in (output if isinstance(output, (tuple, list)) else []) if isinstance(t, torch.Tensor)]
    norms = [m for m in loaded.model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    return {
        "input_bytes": sum(_nbytes(t) for t in tensors),
        "parameter_bytes": sum(_nbytes(p) for p in params),
        "output_bytes": sum(_nbytes(t) for t in outputs),
        "output_numel": sum(t.numel() for t in outputs),
        "input_dtypes": ",".join(sorted({str(t.dtype).replace("torch.", "") for t in tensors})),
        "batchnorm_training": any(m.training for m in norms),
        "_unique_elements": sum(t.numel() for t in tensors) + sum(p.numel() for p in params),
    }


# Pattern features that need the graph's links, which the source text alone does not give.
_GRAPH_ONLY_FEATURES = ("row_op_pointwise_chain", "norm_into_row_op", "gemm_flop_share", "triangular_gemm_count",
                        "reduced_gemm_count",
                        "conv_min_group_width")
_SHAPE_FEATURES = ("simplifiable_patterns", "gemm_m", "gemm_n", "gemm_k", "gemm_mn", "reduction_length",
                   "eager_bytes_moved", "flops", "bytes_moved", "data_reuse", "input_bytes", "parameter_bytes",
                   "output_bytes", "output_numel", "input_dtypes", "batchnorm_training",
                   "epilogue_chain_after_contraction")


def reference_features(source: str, max_cpu_bytes: int = 256 * 2**20) -> Features:
    """Features of a KernelBench-format reference given as source text.

    The model is built on the meta device; only when an op lacks a meta kernel is it rebuilt on
    the CPU, and then only if its inputs stay under `max_cpu_bytes`. They are computed once per
    source (`kskill plan` asks for the sizes before it plans); each caller gets its own copy.
    """
    found = _reference_features(source, max_cpu_bytes)
    return Features(dict(found.values), dict(found.unavailable))


@functools.lru_cache(maxsize=8)
def _reference_features(source: str, max_cpu_bytes: int) -> Features:
    errors: list[str] = []
    built: dict[str, _Loaded | None] = {}

    def build(device: str) -> _Loaded | None:
        if device not in built:
            try:
                built[device] = _load_reference(source, device)
            except Exception as exc:  # the reference cannot be built on this device
                built[device] = None
                errors.append(f"building on {device}: {_first_line(exc)}")
            loaded = built[device]
            if device == "cpu" and loaded is not None and sum(_nbytes(t) for t in loaded.inputs) > max_cpu_bytes:
                built[device] = None
                errors.append(f"inputs exceed {max_cpu_bytes} bytes, too large to run on the CPU")
        return built[device]

    for method, capture in (("fx", _fx_capture), ("export", _export_capture)):
        for device in ("meta", "cpu"):
            loaded = build(device)
            if loaded is None:
                continue
            try:
                with _quiet_torch():
                    nodes, output, contraction_flops = capture(loaded)
            except Exception as exc:  # data-dependent control flow, or an op without a meta kernel
                errors.append(f"{method} on {device}: {_first_line(exc)}")
                if not _device_specific(exc):
                    break  # the same failure would recur on the CPU
                continue
            return _captured_features(source, method, loaded, nodes, output, contraction_flops)
    return _ast_features(source, "; ".join(errors))


def _first_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ''}"


def _device_specific(exc: Exception) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "meta" in text or "notimplementederror" in text


@contextlib.contextmanager
def _quiet_torch():
    """Silence log records and printed diagnostics (torch.export logs whole graphs when it gives up)."""
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        logging.disable(previous)


def _captured_features(source: str, method: str, loaded: _Loaded, nodes: list[OpNode], output: Any,
                       contraction_flops: float) -> Features:
    values: dict[str, Scalar] = {"capture_method": method, "static_shapes": True}
    values.update(_graph_features(nodes))
    # A loop over time steps is unrolled by torch.export and fails torch.fx: the source says what it was.
    values["has_recurrence"] = bool(values["has_recurrence"]) or patterns.has_time_loop(source)
    values.update(_shape_features(nodes))
    problem = _problem_values(loaded, output)
    unique = problem.pop("_unique_elements")
    values.update(problem)
    values["flops"] = int(contraction_flops + _pointwise_flops(nodes))
    gemm_flops = sum(2 * m * n * k for node in OpGraph(nodes).compute_nodes() if node.family == "gemm"
                     and (dims := _gemm_dims(node)) for m, n, k in [dims])
    if values["flops"]:
        values["gemm_flop_share"] = min(1.0, gemm_flops / values["flops"])
    values["bytes_moved"] = int(problem["input_bytes"]) + int(problem["parameter_bytes"]) + int(problem["output_bytes"])
    if unique:
        values["data_reuse"] = float(values["flops"]) / unique
    unavailable = {} if "conv_min_group_width" in values else {
        "conv_min_group_width": "the reference has no 2-d convolution with more than one group"}
    return Features(values, unavailable)


# --- reference: source-only fallback -------------------------------------------------------------------


def _call_name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
           ast.MatMult: "matmul", ast.FloorDiv: "floordiv", ast.Mod: "mod"}


def _ast_features(source: str, why: str) -> Features:
    """Op families and counts from the forward's source text when no graph could be captured."""
    tree = ast.parse(source)
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    modules: dict[str, str] = {}
    forward = None
    for item in model.body if model else []:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            for node in ast.walk(item):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    for target in node.targets:
                        if isinstance(target, ast.Attribute) and (name := _call_name(node.value.func)):
                            modules[target.attr] = canonical(name)
        if isinstance(item, ast.FunctionDef) and item.name == "forward":
            forward = item
    ops: list[str] = []

    def visit(node: ast.AST) -> None:  # operands first, so ops come in evaluation order
        for child in ast.iter_child_nodes(node):
            visit(child)
        if isinstance(node, ast.Call) and (name := _call_name(node.func)):
            is_self = isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "self"
            ops.append(modules.get(name, canonical(name)) if is_self else canonical(name))
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            ops.append(_BINOPS[type(node.op)])

    if forward is not None:
        visit(forward)
    fams = [op_family(o) for o in ops]
    compute = [(o, f) for o, f in zip(ops, fams) if f not in ("view", "other")]
    run = best = 0
    for _, f in compute:
        run = run + 1 if f == "pointwise" else 0
        best = max(best, run)
    cf = [f for _, f in compute]
    values: dict[str, Scalar] = {
        "capture_method": "ast", "op_count": len(compute), "est_kernel_launches": len(compute),
        "pointwise_op_count": cf.count("pointwise"), "reduction_op_count": cf.count("reduction"),
        "reduction_like_op_count": sum(cf.count(f) for f in ROW_FAMILIES), "gemm_op_count": cf.count("gemm"),
        "conv_op_count": cf.count("convolution"), "max_pointwise_chain": best,
        "transcendental_op_count": sum(o in TRANSCENDENTAL for o, _ in compute),
        "layout_op_count": sum(o in LAYOUT for o in ops),
        "has_batchnorm": any("batchnorm" in o or "batch_norm" in o for o, _ in compute),
    }
    for family in ("pointwise", "reduction", "scan", "gemm", "convolution", "normalization", "pooling",
                   "softmax", "loss", "attention"):
        values[f"has_{family}"] = family in cf
    values["has_recurrence"] = "recurrent" in cf or patterns.has_time_loop(source)
    values["has_contraction"] = bool(values["has_gemm"] or values["has_convolution"] or values["has_attention"]
                                     or values["has_recurrence"])
    reason = f"the reference could not be captured as a graph, only its source was read ({why})"
    unavailable = {name: reason for name in (*_SHAPE_FEATURES, *_GRAPH_ONLY_FEATURES, "static_shapes")}
    return Features(values, unavailable)
