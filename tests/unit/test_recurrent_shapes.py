"""Recurrent layers on the meta device: the shapes and FLOPs that the captures take from the layer's
settings, instead of running it step by step, equal those of the layer's own run."""

from __future__ import annotations

import pytest
import recipe_support  # noqa: F401  (sets TRITON_INTERPRET before the recipes define their kernels)
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from kskill.agents import recurrent_shapes
from kskill.agents import features as features_module
from kskill.agents.features import reference_features
from kskill.agents.recipes.capture import capture

LAYERS = {
    "gru, 2 layers, both directions": lambda: nn.GRU(8, 16, 2, bidirectional=True),
    "lstm, batch first": lambda: nn.LSTM(8, 16, 3, batch_first=True),
    "lstm, projected, both directions": lambda: nn.LSTM(8, 16, 2, proj_size=4, bidirectional=True),
    "rnn, relu": lambda: nn.RNN(8, 16, 1, nonlinearity="relu"),
}


def shapes(value):
    return tuple(shapes(v) for v in value) if isinstance(value, tuple) else (tuple(value.shape), value.dtype)


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("input_shape", [(5, 3, 8), (5, 8)], ids=["batched", "unbatched"])
def test_shapes_and_flops_match_the_layers_own_run(name, input_shape):
    layer = LAYERS[name]().to("meta")
    x = torch.empty(input_shape, device="meta")
    assert recurrent_shapes.shortcut_applies(layer, (x,))
    with FlopCounterMode(display=False) as counter:
        ran = layer(x)
    assert shapes(recurrent_shapes.meta_outputs(layer, x)) == shapes(ran)
    assert recurrent_shapes.flops(layer, x) == counter.get_total_flops()


def test_only_meta_tensors_take_the_shortcut():
    layer = nn.GRU(8, 16)
    assert not recurrent_shapes.shortcut_applies(layer, (torch.zeros(5, 3, 8),))
    assert not recurrent_shapes.shortcut_applies(nn.Linear(8, 16), (torch.empty(5, 8, device="meta"),))


GRU_PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 16, 2, bidirectional=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x, h0):
        out, h = self.gru(x, h0)
        return self.head(out[-1]), h

def get_inputs():
    return [torch.randn(6, 3, 8), torch.randn(4, 3, 16)]

def get_init_inputs():
    return []
"""


def test_both_captures_of_a_recurrent_problem_see_what_the_stepped_run_sees(monkeypatch):
    graph = capture(GRU_PROBLEM)
    assert [n.shape for n in graph.nodes if n.op == "getitem"][:2] == [(6, 3, 32), (4, 3, 16)]
    assert (3, 4) in [n.shape for n in graph.nodes]  # the head, after the layer
    features = reference_features(GRU_PROBLEM).values
    monkeypatch.setattr(recurrent_shapes, "shortcut_applies", lambda module, args: False)
    features_module._reference_features.cache_clear()  # computed again, stepped
    stepped = reference_features(GRU_PROBLEM).values
    assert features == stepped and features["flops"] > 0
