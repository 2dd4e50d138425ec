"""A chain of pointwise ops: eager PyTorch writes every intermediate to memory, one kernel would not.

Sizes are small so that a CPU run (Triton interpreter) reviews each candidate in seconds;
KSKILL_EXAMPLE_SCALE=64 (or more) gives GPU-sized inputs.
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = int(os.environ.get("KSKILL_EXAMPLE_SCALE", "1"))
rows = 64 * SCALE
cols = 256 * SCALE


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        z = F.gelu(x + y)
        z = torch.tanh(z) * 2.0 + 1.0
        return torch.sigmoid(z) - 0.5


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return []
