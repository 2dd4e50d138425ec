"""Helpers the region matchers share: dtypes, operands, dims, and the (P, R, Q) view of a tensor.

Every matcher returns a Region only when its template lowers the node with PyTorch's exact
semantics (training-mode batch norm included), or None, so recipes decline rather than emit a
kernel that changes behaviour.
"""

from __future__ import annotations

import math
from typing import Any

from kskill.agents.recipes.graph import Node

FLOATS = ("torch.float32", "torch.float16", "torch.bfloat16")


def is_float(node: Node) -> bool:
    return str(node.dtype) in FLOATS


def first_operand(node: Node) -> Any:
    return node.args[0] if node.args else node.attrs.get("input")


def arg(node: Node, name: str, position: int, default: Any = None) -> Any:
    """An op's argument by schema name, else by position, else the default."""
    if name in node.attrs:
        return node.attrs[name]
    return node.args[position] if len(node.args) > position else default


def int_tuple(value: Any, dims: int) -> tuple[int, ...] | None:
    """An int or a sequence of `dims` ints as a tuple; None otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * dims
    if isinstance(value, (tuple, list)) and len(value) == dims and all(isinstance(x, int) for x in value):
        return tuple(value)
    return None


def pool_window(node: Node, dims: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """A max or average pooling's kernel, stride (the kernel when not given) and padding over its `dims` pooled
    dims; None where one is not an int or `dims` ints."""
    kernel = int_tuple(arg(node, "kernel_size", 1), dims)
    stride = arg(node, "stride", 2)
    stride = kernel if stride in (None, [], ()) else int_tuple(stride, dims)
    pad = int_tuple(arg(node, "padding", 3, 0), dims)
    return None if None in (kernel, stride, pad) else (kernel, stride, pad)


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


REDUCE_OPS = ("sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "logsumexp")
ROW_OPS = ("softmax", "log_softmax", "layer_norm", "group_norm", "instance_norm", "batch_norm") + REDUCE_OPS
