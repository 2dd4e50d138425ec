"""What a template hands back: one Triton kernel (or a few) and the Python launcher that runs it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import torch

from kskill.agents.recipes.graph import Graph, Ref
from kskill.agents.recipes.templates.common import (
    TL_DTYPES, aligned, channels_last_order, operand_key, to_channels_last)


@dataclass
class KernelUnit:
    """Kernel source, launcher source, and how the forward calls it."""

    name: str
    kernel_src: str
    launcher_src: str
    inputs: list[Any]  # graph operands passed to the launcher, in order
    outputs: list[str]  # node names bound to the launcher's results, in order
    params: dict[str, Any] = field(default_factory=dict)
    technique: str = ""

    def call_line(self) -> str:
        args = ", ".join(a.name if isinstance(a, Ref) else a.code for a in self.inputs)
        targets = ", ".join(self.outputs)
        return f"{targets} = {self.name}({args})"


def arg_name(operand: Any) -> str:
    """A launcher parameter name for an operand: the node name, or the attribute path."""
    if isinstance(operand, Ref):
        return operand.name
    return re.sub(r"\W", "_", operand.path)


def prepare(operand: Any, graph: Graph, domain: tuple[int, ...] | None = None,
            nhwc: bool = False, shape: tuple[int, ...] | None = None) -> str:
    """Launcher text giving the operand as the contiguous memory the kernel indexes."""
    name = arg_name(operand)
    order = channels_last_order(len(domain), nhwc) if domain is not None else None
    if order is not None:
        full = aligned(tuple(shape or graph.shape_of(operand) or ()), len(order))
        return f"{to_channels_last(f'{name}.reshape{full}')}.permute{order}"
    return f"{name}.contiguous()"


def alloc(shape: tuple[int, ...], dtype: torch.dtype | None, like: str, nhwc: bool = False) -> str:
    """Launcher text allocating an output (channels_last when the region runs in NHWC)."""
    dt = str(dtype or torch.float32)
    order = channels_last_order(len(shape), nhwc)
    if order is not None:
        stored = tuple(shape[i] for i in order)
        back = tuple(order.index(i) for i in range(len(order)))
        return f"torch.empty({stored}, device={like}.device, dtype={dt}).permute{back}"
    return f"torch.empty({tuple(shape)!r}, device={like}.device, dtype={dt})"


def store_cast(dtype: torch.dtype | None) -> str:
    return TL_DTYPES.get(dtype or torch.float32, "tl.float32")


def pointer_args(operands: list[Any]) -> dict[str, str]:
    """Kernel pointer argument names keyed by operand key."""
    return {operand_key(op): f"{arg_name(op)}_ptr" for op in operands}

