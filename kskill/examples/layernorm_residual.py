"""LayerNorm of a residual sum: the add and the normalisation can share one pass over the rows.

Sizes are small so that a CPU run (Triton interpreter) reviews each candidate in seconds;
KSKILL_EXAMPLE_SCALE=32 (or more) gives GPU-sized inputs.
"""

import os

import torch
import torch.nn as nn

SCALE = int(os.environ.get("KSKILL_EXAMPLE_SCALE", "1"))
rows = 64 * SCALE
dim = 128 * SCALE


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, residual):
        return self.norm(x + residual)


def get_inputs():
    return [torch.randn(rows, dim), torch.randn(rows, dim)]


def get_init_inputs():
    return [dim]
