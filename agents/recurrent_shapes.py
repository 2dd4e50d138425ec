"""Recurrent layers (nn.RNN, nn.GRU, nn.LSTM) on the meta device, without running them step by step.

On the meta device torch runs a recurrent layer as its decomposition, step by step: a GRU of 6
bidirectional layers over 512 steps is about 130,000 small ops, 10-30 s of Python dispatch, where a
capture needs only the output's shapes and the FLOP count. Both follow from the layer's settings
and its input's shape. Packed sequences are left to the layer itself.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "GRU": 3, "LSTM": 4}  # gate blocks per weight matrix


def meta_call(interpreter: Any, node: Any) -> tuple[Any, int] | None:
    """For an fx Interpreter at `node`: (output, FLOPs) of a recurrent layer called on a meta
    tensor, from its settings; None where the node must be run as it is."""
    if node.op != "call_module":
        return None
    module = interpreter.fetch_attr(node.target)
    args = interpreter.map_nodes_to_values(node.args, node)
    if not shortcut_applies(module, args):
        return None
    return meta_outputs(module, args[0]), flops(module, args[0])


def shortcut_applies(module: Any, args: tuple[Any, ...]) -> bool:
    """A recurrent layer called on a meta tensor of 2 or 3 dimensions (unbatched or batched)."""
    return (isinstance(module, nn.RNNBase) and module.mode in GATES and bool(args)
            and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta" and args[0].dim() in (2, 3))


def _sizes(module: nn.RNNBase, x: torch.Tensor) -> tuple[int | None, int, int, int]:
    """(batch or None when unbatched, steps, directions, output features per direction)."""
    directions = 2 if module.bidirectional else 1
    out_features = module.proj_size if getattr(module, "proj_size", 0) else module.hidden_size
    if x.dim() == 2:
        return None, x.shape[0], directions, out_features
    batch, steps = (x.shape[0], x.shape[1]) if module.batch_first else (x.shape[1], x.shape[0])
    return batch, steps, directions, out_features


def meta_outputs(module: nn.RNNBase, x: torch.Tensor) -> Any:
    """What the layer returns for input `x`, as meta tensors of the right shapes and dtype."""
    batch, steps, directions, out_features = _sizes(module, x)
    lead = (steps,) if batch is None else ((batch, steps) if module.batch_first else (steps, batch))
    state = (directions * module.num_layers,) + (() if batch is None else (batch,))

    def empty(*shape: int) -> torch.Tensor:
        return torch.empty(shape, dtype=x.dtype, device="meta")

    output = empty(*lead, directions * out_features)
    if module.mode == "LSTM":
        return output, (empty(*state, out_features), empty(*state, module.hidden_size))
    return output, empty(*state, out_features)


def flops(module: nn.RNNBase, x: torch.Tensor) -> int:
    """The layer's matrix-product FLOPs (2 per multiply-add, as FlopCounterMode counts them): at
    each step and direction, the input and the hidden state times their gate weight matrices."""
    batch, steps, directions, out_features = _sizes(module, x)
    gate_rows = GATES[module.mode] * module.hidden_size
    total = 0
    for layer in range(module.num_layers):
        inputs = module.input_size if layer == 0 else directions * out_features
        per_step = gate_rows * (inputs + out_features)
        if getattr(module, "proj_size", 0):
            per_step += module.hidden_size * module.proj_size
        total += 2 * per_step * directions
    return total * steps * (batch or 1)
