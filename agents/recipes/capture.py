"""Capture a KernelBench-format reference into the recipe brain's graph.

The problem file is executed in a fresh module; `Model(*get_init_inputs())` is built exactly as
the problem builds it (not switched to eval mode) on the meta device so that large problems cost
no memory, traced with torch.fx, and shape-propagated with the problem's own `get_inputs()`.
Integer values read from shapes (`x.size(0)`) are folded into constants: candidates are
specialised to the problem's static shapes and check them at run time.
"""

from __future__ import annotations

import copy
import functools
import inspect
import operator
import types
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx
from torch import nn

from kskill.agents import recurrent_shapes
from kskill.agents.recipes.errors import CaptureError
from kskill.agents.recipes.graph import Attr, DeviceOf, Graph, Node, Ref, operand_code

_OPERATORS: dict[Callable[..., Any], tuple[str, str]] = {
    operator.add: ("add", "{0} + {1}"),
    operator.iadd: ("add", "{0} + {1}"),
    operator.sub: ("sub", "{0} - {1}"),
    operator.mul: ("mul", "{0} * {1}"),
    operator.imul: ("mul", "{0} * {1}"),
    operator.truediv: ("div", "{0} / {1}"),
    operator.pow: ("pow", "{0} ** {1}"),
    operator.matmul: ("matmul", "{0} @ {1}"),
    operator.neg: ("neg", "-{0}"),
    operator.getitem: ("getitem", "{0}[{1}]"),
    # comparisons and integer arithmetic (a causal mask `self.bias[..., :T, :T] == 0`): PyTorch text only
    operator.eq: ("eq", "({0} == {1})"),
    operator.ne: ("ne", "({0} != {1})"),
    operator.lt: ("lt", "({0} < {1})"),
    operator.le: ("le", "({0} <= {1})"),
    operator.gt: ("gt", "({0} > {1})"),
    operator.ge: ("ge", "({0} >= {1})"),
    operator.floordiv: ("floor_divide", "({0} // {1})"),
    operator.mod: ("remainder", "({0} % {1})"),
    operator.and_: ("logical_and", "({0} & {1})"),
    operator.or_: ("logical_or", "({0} | {1})"),
    operator.invert: ("bitwise_not", "(~{0})"),
}

# Module types whose call becomes a canonical op, with the attributes a recipe needs.
_MODULE_OPS: dict[type, str] = {
    nn.Linear: "linear", nn.Conv1d: "conv1d", nn.Conv2d: "conv2d", nn.Conv3d: "conv3d",
    nn.ConvTranspose1d: "conv_transpose1d", nn.ConvTranspose2d: "conv_transpose2d",
    nn.ConvTranspose3d: "conv_transpose3d",
    nn.ReLU: "relu", nn.GELU: "gelu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh", nn.SiLU: "silu",
    nn.Mish: "mish", nn.ELU: "elu", nn.SELU: "selu", nn.LeakyReLU: "leaky_relu",
    nn.Hardtanh: "hardtanh", nn.ReLU6: "relu6", nn.Hardsigmoid: "hardsigmoid",
    nn.Hardswish: "hardswish", nn.Softplus: "softplus", nn.Softsign: "softsign",
    nn.Identity: "identity", nn.Dropout: "dropout",
    nn.Softmax: "softmax", nn.LogSoftmax: "log_softmax",
    nn.LayerNorm: "layer_norm", nn.GroupNorm: "group_norm",
    nn.BatchNorm1d: "batch_norm", nn.BatchNorm2d: "batch_norm", nn.BatchNorm3d: "batch_norm",
    nn.InstanceNorm1d: "instance_norm", nn.InstanceNorm2d: "instance_norm",
    nn.InstanceNorm3d: "instance_norm",
    nn.MaxPool1d: "max_pool1d", nn.MaxPool2d: "max_pool2d", nn.MaxPool3d: "max_pool3d",
    nn.AvgPool1d: "avg_pool1d", nn.AvgPool2d: "avg_pool2d", nn.AvgPool3d: "avg_pool3d",
    nn.AdaptiveAvgPool1d: "adaptive_avg_pool1d", nn.AdaptiveAvgPool2d: "adaptive_avg_pool2d",
    nn.AdaptiveAvgPool3d: "adaptive_avg_pool3d", nn.AdaptiveMaxPool1d: "adaptive_max_pool1d",
    nn.AdaptiveMaxPool2d: "adaptive_max_pool2d", nn.AdaptiveMaxPool3d: "adaptive_max_pool3d",
    nn.Flatten: "flatten",
    nn.MSELoss: "mse_loss", nn.L1Loss: "l1_loss", nn.SmoothL1Loss: "smooth_l1_loss",
    nn.HuberLoss: "huber_loss", nn.CrossEntropyLoss: "cross_entropy", nn.KLDivLoss: "kl_div",
    nn.HingeEmbeddingLoss: "hinge_embedding_loss", nn.TripletMarginLoss: "triplet_margin_loss",
    nn.CosineEmbeddingLoss: "cosine_embedding_loss", nn.CosineSimilarity: "cosine_similarity",
    nn.PairwiseDistance: "pairwise_distance", nn.MultiheadAttention: "multihead_attention",
}

_MODULE_ATTRS = (
    "in_features", "out_features", "stride", "padding", "dilation", "groups", "kernel_size",
    "output_padding", "padding_mode", "negative_slope", "alpha", "min_val", "max_val", "beta",
    "threshold", "approximate", "p", "dim", "normalized_shape", "eps", "elementwise_affine",
    "num_groups", "num_channels", "num_features", "affine", "momentum", "track_running_stats",
    "ceil_mode", "count_include_pad", "divisor_override", "return_indices", "output_size",
    "start_dim", "end_dim", "reduction", "delta", "ignore_index", "label_smoothing", "log_target",
    "training", "inplace", "margin", "swap", "norm", "keepdim",
    "embed_dim", "num_heads", "head_dim", "batch_first", "add_zero_attn", "_qkv_same_embed_dim",
)


@dataclass
class Problem:
    """A loaded KernelBench problem: its module namespace, init args and example inputs (meta)."""

    source: str
    namespace: types.ModuleType
    init_inputs: list[Any]
    model: nn.Module
    inputs: list[Any]


def load_problem(source: str, device: str = "meta") -> Problem:
    """Execute the problem source and build Model and inputs on `device` with seed 0."""
    namespace = types.ModuleType("kskill_reference")
    try:
        exec(compile(source, "<reference>", "exec"), namespace.__dict__)
    except Exception as exc:  # the problem text itself is broken: say so, keep the cause
        raise CaptureError(f"the reference does not run: {type(exc).__name__}: {exc}") from exc
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(namespace, name):
            raise CaptureError(f"the reference defines no `{name}`; KernelBench format needs Model, "
                               "get_inputs and get_init_inputs")
    torch.manual_seed(0)
    with torch.device(device):
        init_inputs = list(namespace.get_init_inputs())
        model = namespace.Model(*init_inputs)
        inputs = list(namespace.get_inputs())
    return Problem(source, namespace, init_inputs, model, inputs)


class _MetaRecorder(torch.fx.Interpreter):
    """Runs the traced graph once and records every node's result kind, shape and dtype."""

    def run_node(self, n: torch.fx.Node) -> Any:
        shortcut = recurrent_shapes.meta_call(self, n)  # a recurrent layer: not run step by step
        result = shortcut[0] if shortcut is not None else super().run_node(n)
        n.meta["kskill_value"] = result
        return result


def capture(source: str) -> Graph:
    """Trace the reference and return its graph of canonical ops with static shapes.

    A reference is captured once per process (a run plans and builds many candidates of one
    problem); each caller gets its own copy, since building a candidate rewrites the graph.
    """
    graph = _captured(source)
    if isinstance(graph, CaptureError):
        raise graph
    return copy.deepcopy(graph)


@functools.lru_cache(maxsize=8)
def _captured(source: str) -> Graph | CaptureError:
    try:
        return _capture(source)
    except CaptureError as exc:  # kept, so a reference that cannot be captured is not retried
        return exc


def trace(model: nn.Module, inputs: list[Any] | None = None) -> torch.fx.GraphModule:
    """torch.fx.symbolic_trace, with buffers read as graph values like parameters: a buffer indexed in
    forward (self.table[1]) stays an op on the buffer, not a constant the trace folds and names. With
    `inputs`, the trace knows their values (ShapeTracer) and takes Python branches over sizes."""
    tracer = torch.fx.Tracer() if inputs is None else ShapeTracer(inputs)
    tracer.proxy_buffer_attributes = True
    concrete = None
    if inputs is not None:  # forward's parameters past the inputs given keep their defaults (`mask=None`)
        params = list(inspect.signature(model.forward).parameters.values())[len(inputs):]
        concrete = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty} or None
    graph = tracer.trace(model, concrete_args=concrete)
    return torch.fx.GraphModule(tracer.root, graph, type(model).__name__)


_UNKNOWN = object()
# An unrolled time loop of this many ops is past what a candidate can usefully rewrite (VanillaRNN's 256
# steps trace to about 1,300); its capture fails with a clear reason instead of growing without end.
MAX_TRACED_NODES = 50_000


class ShapeProxy(torch.fx.Proxy):
    """A traced value that can stand where Python needs a number: `range(seq_len)`, `int(h)`."""

    def __index__(self) -> int:
        return int(self.tracer.static_value(self))

    def __int__(self) -> int:
        return int(self.tracer.static_value(self))

    def __len__(self) -> int:
        return len(self.tracer.value_of(self))


class ShapeTracer(torch.fx.Tracer):
    """torch.fx's tracer that also computes every traced value from the example inputs as it goes (on
    the device they live on: meta, so nothing is allocated), so Python control flow over sizes takes the
    branch these inputs take: `if H % window:`, `for t in range(x.size(0))` (unrolled), `B, L, C =
    x.shape`. The graph is specialised to the problem's shapes, as every candidate is. Used when the
    plain trace cannot follow such control flow; a branch on a tensor's data, or on a value it could not
    compute, still fails."""

    def __init__(self, inputs: list[Any]) -> None:
        super().__init__()
        self.inputs = list(inputs)
        self.values: dict[torch.fx.Node, Any] = {}
        self.placeholders = 0
        self.evaluating = False  # a leaf module's value being computed: its own calls are not traced
        self.tensors: dict[str, torch.Tensor] | None = None  # the root's parameters and buffers, read once

    def call_module(self, m: nn.Module, forward: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any]) -> Any:
        if self.evaluating:
            return forward(*args, **kwargs)
        return super().call_module(m, forward, args, kwargs)

    def getattr(self, attr: str, attr_val: Any, parameter_proxy_cache: dict[str, Any]) -> Any:
        if self.evaluating:  # the module's own weights, not graph values
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def proxy(self, node: torch.fx.Node) -> torch.fx.Proxy:
        return ShapeProxy(node, self)

    def value_of(self, proxy: torch.fx.Proxy) -> Any:
        value = self.values.get(proxy.node, _UNKNOWN)
        if value is _UNKNOWN:
            raise torch.fx.proxy.TraceError(f"the value of {proxy.node.name} could not be computed while tracing")
        return value

    def static_value(self, proxy: torch.fx.Proxy) -> Any:
        """The value of a size, a device or another Python value; a tensor's contents are data, which
        other inputs would change, so a branch on them is refused."""
        value = self.value_of(proxy)
        if isinstance(value, torch.Tensor):
            raise torch.fx.proxy.TraceError(f"control flow over the data of {proxy.node.name}, not its size")
        return value

    def to_bool(self, obj: torch.fx.Proxy) -> bool:
        return bool(self.static_value(obj))

    def iter(self, obj: torch.fx.Proxy) -> Any:
        return iter(obj[i] for i in range(len(self.value_of(obj))))

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        if len(self.values) >= MAX_TRACED_NODES:
            raise torch.fx.proxy.TraceError(f"more than {MAX_TRACED_NODES} traced ops: a loop over sizes too long "
                                            "to unroll")
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, proxy_factory_fn)
        try:
            self.values[proxy.node] = self._evaluate(kind, target, args, kwargs)
        except Exception:  # an op the device cannot run: fine unless control flow asks for its value
            self.values[proxy.node] = _UNKNOWN
        return proxy

    def _evaluate(self, kind: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        def value(a: Any) -> Any:
            return torch.fx.node.map_aggregate(a, lambda v: self.value_of(v) if isinstance(v, torch.fx.Proxy) else v)

        args, kwargs = value(args), value(kwargs)
        if kind == "placeholder":  # an input, or a parameter's default (`mask=None`) past the inputs given
            self.placeholders += 1
            return self.inputs[self.placeholders - 1] if self.placeholders <= len(self.inputs) else (args or (None,))[0]
        if kind == "get_attr":  # a parameter or buffer (the trace's own attribute lookups are patched)
            if self.tensors is None:
                self.tensors = dict(self.root.named_parameters()) | dict(self.root.named_buffers())
            return self.tensors.get(target, _UNKNOWN)
        if kind == "call_function":
            return target(*args, **kwargs)
        if kind == "call_method":
            return getattr(args[0], target)(*args[1:], **kwargs)
        if kind == "call_module":
            self.evaluating = True
            try:
                return self.root.get_submodule(target)(*args, **kwargs)
            finally:
                self.evaluating = False
        return _UNKNOWN


def _capture(source: str) -> Graph:
    problem = None
    for device in ("meta", "cpu"):
        try:
            problem = load_problem(source, device)
            try:
                traced = trace(problem.model)
            except (torch.fx.proxy.TraceError, TypeError):  # control flow over sizes: follow these inputs'
                traced = trace(problem.model, problem.inputs)
            _MetaRecorder(traced).run(*problem.inputs)
            break
        except CaptureError:
            raise
        except Exception as exc:  # meta tensors lack some ops; retried once on the CPU below
            last_error = exc
            problem = None
            if device == "cpu":
                raise CaptureError(
                    f"torch.fx cannot capture the reference ({type(exc).__name__}: {exc}); "
                    "data-dependent control flow is left to PyTorch") from exc
    assert problem is not None
    return _to_graph(traced, problem.model)


def _meta_of(value: Any) -> tuple[tuple[int, ...] | None, torch.dtype | None]:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape), value.dtype
    return None, None


def _to_graph(traced: torch.fx.GraphModule, model: nn.Module) -> Graph:
    nodes: list[Node] = []
    constants: dict[str, Any] = {}
    output: Any = None
    attr_meta = {name: (tuple(t.shape), t.dtype)
                 for name, t in list(model.named_parameters()) + list(model.named_buffers())}
    module_types = {name: type(m).__name__ for name, m in model.named_modules()}
    made: set[str] = set()  # constants the trace made (get_attr nodes), turned into graph nodes

    def convert(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            if value.name in constants:
                return constants[value.name]
            if value.op == "get_attr" and value.name not in made:
                return Attr(value.target)
            return Ref(value.name)
        if isinstance(value, (tuple, list)):
            return type(value)(convert(v) for v in value)
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, slice):  # x[:, :T] with T read off a size: the bound is a folded value
            return slice(convert(value.start), convert(value.stop), convert(value.step))
        return value

    first = next((n for n in traced.graph.nodes if n.op == "placeholder"), None)
    first_input = first.name if first is not None else None
    seen_on = getattr(first.meta.get("kskill_value"), "device", None) if first is not None else None
    for fx_node in traced.graph.nodes:
        result = fx_node.meta.get("kskill_value")
        if fx_node.op == "output":
            output = convert(fx_node.args[0])
            continue
        if fx_node.op == "get_attr":
            scalar = _traced_scalar(traced, fx_node.target, attr_meta)
            if scalar is not None:  # `torch.tensor(self.value)` in forward: a constant the trace made
                value, dtype = scalar
                device = f", device={first_input}.device" if first_input else ""
                node = Node(fx_node.name, "tensor", (value,), {"dtype": dtype},
                            code=f"torch.full((), {operand_code(value)}, dtype={dtype}{device})")
                node.shape, node.dtype = (), dtype
                nodes.append(node)
                made.add(fx_node.name)
            continue  # parameters and buffers: read through Attr operands
        if fx_node.op != "placeholder" and not _holds_tensor(result):
            # sizes and other Python values: folded; the device the capture ran on, as the inputs'
            constants[fx_node.name] = (DeviceOf(first_input) if result == seen_on and first_input else result)
            continue
        shape, dtype = _meta_of(result)
        args = convert(tuple(fx_node.args))
        kwargs = convert(dict(fx_node.kwargs))
        node = _canonical(fx_node, args, kwargs, model)
        node.shape, node.dtype = shape, dtype
        node.multi = isinstance(result, (tuple, list))
        nodes.append(node)
    return Graph(nodes, output, attr_meta, module_types)


def _traced_scalar(traced: torch.fx.GraphModule, target: str, attr_meta: dict[str, Any]) -> tuple[Any, Any] | None:
    """(value, dtype) of a 0-d tensor that tracing made a constant of the traced module (not one of
    the model's parameters or buffers), or None."""
    if target in attr_meta:
        return None
    value = getattr(traced, target, None)
    if not isinstance(value, torch.Tensor) or value.dim() != 0 or value.device.type == "meta":
        return None
    return value.item(), value.dtype


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(_holds_tensor(v) for v in value)
    return False


def _call_text(callee: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [operand_code(a) for a in args] + [f"{k}={operand_code(v)}" for k, v in kwargs.items()]
    return f"{callee}({', '.join(parts)})"


def _canonical(fx_node: torch.fx.Node, args: tuple[Any, ...], kwargs: dict[str, Any],
               model: nn.Module) -> Node:
    name = fx_node.name
    if fx_node.op == "placeholder":  # a default (`mask=None`) is kept for the generated forward's signature
        return Node(name, "input", attrs={"default": args[0]} if args else {}, code=name)
    if fx_node.op == "call_module":
        module = model.get_submodule(fx_node.target)
        op = _MODULE_OPS.get(type(module), "call")
        attrs = {a: getattr(module, a) for a in _MODULE_ATTRS if hasattr(module, a)}
        attrs["has_bias"] = getattr(module, "bias", None) is not None
        attrs["has_weight"] = getattr(module, "weight", None) is not None
        if isinstance(module, nn.MultiheadAttention):
            attrs.update(call_kwargs=kwargs, dropout_p=module.dropout, has_bias_kv=module.bias_k is not None,
                         has_in_proj_bias=module.in_proj_bias is not None,
                         has_out_proj_bias=module.out_proj.bias is not None)
        return Node(name, op, args, attrs, code=_call_text(Attr(fx_node.target).code, args, kwargs),
                    module=fx_node.target)
    if fx_node.op == "call_method":
        method = fx_node.target
        code = f"{operand_code(args[0])}.{_call_text(method, args[1:], kwargs)}"
        op, attrs = _normalise(getattr(torch, method, None), method, args, kwargs)
        return Node(name, _elementwise_extreme(op, args, attrs), args, attrs, code=code)
    target = fx_node.target
    if target in _OPERATORS:
        op, template = _OPERATORS[target]
        return Node(name, op, args, {}, code=template.format(*(operand_code(a) for a in args)))
    qualified = torch.fx.node._get_qualified_name(target)
    if qualified.startswith("torch._C._nn."):
        qualified = "torch.nn.functional." + qualified.rsplit(".", 1)[1]
    op, attrs = _normalise(target, getattr(target, "__name__", "call"), args, kwargs)
    if target is torch.tensor and len(args) == 1 and isinstance(args[0], (bool, int, float)):
        # a number made a tensor in forward: torch.full fills it on the device (the same value and dtype),
        # where torch.tensor copies it from host memory, which a CUDA graph cannot capture
        return Node(name, op, args, attrs, code=_call_text("torch.full", ((), args[0]), kwargs))
    return Node(name, _elementwise_extreme(op, args, attrs), args, attrs, code=_call_text(qualified, args, kwargs))


def _elementwise_extreme(op: str, args: tuple[Any, ...], attrs: dict[str, Any]) -> str:
    """`torch.min(a, b)` / `torch.max(a, b)` of two tensors is the elementwise minimum / maximum,
    not the reduction `torch.min(a, dim)` the same name also means."""
    if op in ("min", "max") and (isinstance(args[1] if len(args) > 1 else attrs.get("other"), (Ref, Attr))):
        return {"min": "minimum", "max": "maximum"}[op]
    return op


_ALIASES = {"clip": "clamp", "true_divide": "div", "divide": "div", "multiply": "mul",
            "subtract": "sub", "absolute": "abs", "negative": "neg", "max_pool2d_with_indices": "max_pool2d",
            "max_pool1d_with_indices": "max_pool1d", "max_pool3d_with_indices": "max_pool3d",
            "adaptive_max_pool1d_with_indices": "adaptive_max_pool1d",
            "adaptive_max_pool2d_with_indices": "adaptive_max_pool2d",
            "adaptive_max_pool3d_with_indices": "adaptive_max_pool3d", "bmm": "matmul", "mm": "matmul"}


def _normalise(fn: Callable[..., Any] | None, name: str, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Canonical op name and keyword attributes (positional arguments named by the schema)."""
    op = name.rstrip("_") if not name.startswith("_") else name
    op = _ALIASES.get(op, op)
    attrs: dict[str, Any] = dict(kwargs)
    if name.endswith("_") and not name.startswith("_"):
        attrs["inplace"] = True
    if fn is not None:
        try:
            normalised = torch.fx.operator_schemas.normalize_function(
                fn, tuple(_probe(a) for a in args), kwargs, normalize_to_only_use_kwargs=True)
        except Exception:  # no schema for this callable: keep the raw positional form
            normalised = None
        if normalised is not None:
            kw = normalised.kwargs if hasattr(normalised, "kwargs") else normalised[1]
            attrs = {k: v for k, v in kw.items()}
            # keep positional operands under their schema names but as the converted values
            names = list(attrs)
            for i, a in enumerate(args):
                if i < len(names):
                    attrs[names[i]] = a
    return op, attrs


def _probe(value: Any) -> Any:
    """Stand-in values so schema matching sees tensors where the graph has operands."""
    if isinstance(value, (Ref, Attr)):
        return torch.empty(0, device="meta")
    if isinstance(value, (tuple, list)):
        return type(value)(_probe(v) for v in value)
    return value
