"""Pointwise ops the recipe brain can fuse, as Triton expressions computed in fp32.

`triton_expr(node, operands)` gives the expression for one canonical op given the Triton text
of its operands (already fp32 values), or None when this configuration of the op is not
supported (the node then stays in PyTorch). Transcendentals are written with `tl.exp`/`tl.log`
so the same text runs on every Triton version and in the interpreter.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from kskill.agents.recipes.graph import Attr, Node, Ref

_SQRT1_2 = repr(1.0 / math.sqrt(2.0))
_SQRT_2_PI = repr(math.sqrt(2.0 / math.pi))
_SELU_ALPHA = 1.6732632423543772
_SELU_SCALE = 1.0507009873554805


def lit(value: Any) -> str:
    """A float literal Triton accepts."""
    return repr(float(value))


def _sigmoid(x: str) -> str:
    return f"(1.0 / (1.0 + tl.exp(-({x}))))"


def _tanh(x: str) -> str:
    # tanh(x) = 1 - 2 / (exp(2x) + 1): exact at both tails, ~1e-7 absolute error near zero
    return f"(1.0 - 2.0 / (tl.exp(2.0 * ({x})) + 1.0))"


def _softplus(x: str, beta: float = 1.0, threshold: float = 20.0) -> str:
    bx = f"({x})" if beta == 1.0 else f"({lit(beta)} * ({x}))"
    soft = f"tl.log(1.0 + tl.exp({bx}))" if beta == 1.0 else f"(tl.log(1.0 + tl.exp({bx})) / {lit(beta)})"
    return f"tl.where({bx} > {lit(threshold)}, ({x}), {soft})"


def _gelu(x: str, approximate: str) -> str:
    if approximate == "tanh":
        inner = f"{_SQRT_2_PI} * (({x}) + 0.044715 * ({x}) * ({x}) * ({x}))"
        return f"(0.5 * ({x}) * (1.0 + {_tanh(inner)}))"
    return f"(0.5 * ({x}) * (1.0 + tl.math.erf(({x}) * {_SQRT1_2})))"


def _pow(base: str, exponent: Any) -> str | None:
    if not isinstance(exponent, (int, float)):
        return None
    if float(exponent).is_integer() and 0 <= exponent <= 4:
        if exponent == 0:
            return f"(({base}) * 0.0 + 1.0)"
        return "(" + " * ".join([f"({base})"] * int(exponent)) + ")"
    if exponent == 0.5:
        return f"tl.sqrt({base})"
    if exponent == -0.5:
        return f"tl.math.rsqrt({base})"
    if exponent == -1:
        return f"(1.0 / ({base}))"
    return None  # general powers of possibly negative bases are left to PyTorch


def _clamp(x: str, low: Any, high: Any) -> str | None:
    out = x
    for bound, fn in ((low, "tl.maximum"), (high, "tl.minimum")):
        if bound is None:
            continue
        if not isinstance(bound, (int, float)):
            return None
        out = f"{fn}({out}, {lit(bound)})"
    return f"({out})"


def _attr(node: Node, name: str, position: int, default: Any) -> Any:
    if name in node.attrs:
        return node.attrs[name]
    if len(node.args) > position:
        return node.args[position]
    return default


Unary = Callable[[Node, str], str | None]

UNARY: dict[str, Unary] = {
    "relu": lambda n, x: f"tl.maximum({x}, 0.0)",
    "relu6": lambda n, x: f"tl.minimum(tl.maximum({x}, 0.0), 6.0)",
    "identity": lambda n, x: x,
    "contiguous": lambda n, x: x,
    "clone": lambda n, x: x,
    "detach": lambda n, x: x,  # forward values are unchanged; a fused kernel keeps no autograd history anyway
    "sigmoid": lambda n, x: _sigmoid(x),
    "tanh": lambda n, x: _tanh(x),
    "silu": lambda n, x: f"(({x}) * {_sigmoid(x)})",
    "gelu": lambda n, x: _gelu(x, _attr(n, "approximate", 99, "none")),
    "exp": lambda n, x: f"tl.exp({x})",
    "log": lambda n, x: f"tl.log({x})",
    "sqrt": lambda n, x: f"tl.sqrt({x})",
    "rsqrt": lambda n, x: f"tl.math.rsqrt({x})",
    "abs": lambda n, x: f"tl.abs({x})",
    "neg": lambda n, x: f"(-({x}))",
    "reciprocal": lambda n, x: f"(1.0 / ({x}))",
    "square": lambda n, x: f"(({x}) * ({x}))",
    "erf": lambda n, x: f"tl.math.erf({x})",
    "sin": lambda n, x: f"tl.sin({x})",
    "cos": lambda n, x: f"tl.cos({x})",
    "softsign": lambda n, x: f"(({x}) / (1.0 + tl.abs({x})))",
    "hardsigmoid": lambda n, x: f"(tl.minimum(tl.maximum(({x}) + 3.0, 0.0), 6.0) / 6.0)",
    "hardswish": lambda n, x: f"(({x}) * tl.minimum(tl.maximum(({x}) + 3.0, 0.0), 6.0) / 6.0)",
    "mish": lambda n, x: f"(({x}) * {_tanh(_softplus(x))})",
    "softplus": lambda n, x: _softplus(x, float(_attr(n, "beta", 1, 1.0)), float(_attr(n, "threshold", 2, 20.0))),
    "leaky_relu": lambda n, x: f"tl.where({x} > 0.0, {x}, ({x}) * {lit(_attr(n, 'negative_slope', 1, 0.01))})",
    "elu": lambda n, x: f"tl.where({x} > 0.0, {x}, {lit(_attr(n, 'alpha', 1, 1.0))} * (tl.exp({x}) - 1.0))",
    "selu": lambda n, x: (f"({lit(_SELU_SCALE)} * tl.where({x} > 0.0, {x}, "
                          f"{lit(_SELU_ALPHA)} * (tl.exp({x}) - 1.0)))"),
    "hardtanh": lambda n, x: _clamp(x, _attr(n, "min_val", 1, -1.0), _attr(n, "max_val", 2, 1.0)),
    "clamp": lambda n, x: _clamp(x, _attr(n, "min", 1, None), _attr(n, "max", 2, None)),
    "dropout": lambda n, x: x,  # only admitted when it is the identity (see is_pointwise)
}

BINARY: dict[str, str] = {
    "add": "({a} + {b})",
    "sub": "({a} - {b})",
    "mul": "({a} * {b})",
    "div": "({a} / {b})",
    "maximum": "tl.maximum({a}, {b})",
    "minimum": "tl.minimum({a}, {b})",
    "rsub": "({b} - {a})",
}


def data_operands(node: Node) -> list[Any]:
    """The operands a pointwise op computes on (tensors or constants), in order."""
    if node.op in UNARY:
        first = node.args[0] if node.args else node.attrs.get("input")
        return [first]
    if node.op in BINARY or node.op == "pow":
        args = list(node.args[:2])
        for key in ("other", "exponent"):
            if len(args) < 2 and key in node.attrs:
                args.append(node.attrs[key])
        if len(args) == 1 and "input" in node.attrs:
            args.insert(0, node.attrs["input"])
        return args
    if node.op == "where":
        return list(node.args[:3])
    return []


def is_identity_dropout(node: Node) -> bool:
    p = _attr(node, "p", 1, 0.5)
    training = node.attrs.get("training", True)
    return p == 0 or not training


def triton_expr(node: Node, operands: list[str], raw: list[Any]) -> str | None:
    """The Triton expression for `node` given its operands' text (`raw`: the graph operands)."""
    if node.op == "dropout" and not is_identity_dropout(node):
        return None
    if node.op in UNARY:
        return UNARY[node.op](node, operands[0])
    if node.op == "pow":
        if isinstance(raw[0], (Ref, Attr)) and not isinstance(raw[1], (Ref, Attr)):
            return _pow(operands[0], raw[1])
        return None
    if node.op in BINARY:
        if node.op in ("add", "sub") and _attr(node, "alpha", 99, 1) != 1:
            return None
        if node.op == "div" and node.attrs.get("rounding_mode") is not None:
            return None
        return BINARY[node.op].format(a=operands[0], b=operands[1])
    return None
